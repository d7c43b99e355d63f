-- The policy set a question was asked under (SPEC §14, "Edits stay
-- safe"): the inbox, another process, checks an approver's edit by it
-- before it takes the edit. A set is kept once, by the SHA-256 of its
-- text; a question names it, with what else the check reads of the call
-- (JSON: the engine's settings, the tool's server, the model turn).
CREATE TABLE crew_policy_sets (
    hash TEXT PRIMARY KEY,
    language TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

ALTER TABLE crew_approvals ADD COLUMN policy_hash TEXT;
ALTER TABLE crew_approvals ADD COLUMN policy_context TEXT;
