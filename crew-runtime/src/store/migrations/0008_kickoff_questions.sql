-- The process that held an approved call when its outcome was recorded
-- (a durable kickoff's owner: for a parked kickoff, the replica that
-- resumed it), shown by the inbox beside the outcome. NULL when the
-- process did not name itself, and for outcomes recorded before.
ALTER TABLE crew_approvals ADD COLUMN outcome_by TEXT;

-- A durable kickoff's questions, found by the kickoff: whether a parked
-- kickoff has an answer to take (read from this index alone, for every
-- parked kickoff at each look of a resumer), the question of a call a
-- resumed run asks again, the questions of a cancelled kickoff.
CREATE INDEX crew_approvals_by_kickoff ON crew_approvals (kickoff_id, status, taken_at);

-- The questions past their deadline or their lease, which every resumer's
-- look closes: found from these indexes, without reading the open
-- questions (a thousand parked kickoffs wait on a thousand of them).
CREATE INDEX crew_approvals_by_deadline ON crew_approvals (status, deadline);
CREATE INDEX crew_approvals_by_lease ON crew_approvals (status, lease_until);
