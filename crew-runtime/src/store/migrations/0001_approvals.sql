-- Questions to people about tool calls, and their answers.
-- Portable SQL: the same text runs on SQLite and PostgreSQL. Times are
-- milliseconds since the Unix epoch; JSON documents are stored as text.
CREATE TABLE crew_approvals (
    id TEXT PRIMARY KEY,
    call_id TEXT,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    tool_schema TEXT,
    capabilities TEXT NOT NULL,
    agent TEXT,
    task TEXT,
    crew TEXT,
    kickoff_id TEXT,
    requester TEXT,
    prompt TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    deadline BIGINT NOT NULL,
    owner TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    status TEXT NOT NULL,
    approver TEXT,
    decision TEXT,
    edited_arguments TEXT,
    comment TEXT,
    answered_at BIGINT
);

CREATE INDEX crew_approvals_by_status ON crew_approvals (status, created_at);
CREATE INDEX crew_approvals_by_owner ON crew_approvals (owner, status);

-- Answers that were refused (too late, abandoned, already answered, the
-- requester's own), kept so that nobody can say they answered unseen.
CREATE TABLE crew_approval_refusals (
    id TEXT PRIMARY KEY,
    approval_id TEXT NOT NULL,
    approver TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    at BIGINT NOT NULL
);

CREATE INDEX crew_approval_refusals_by_approval ON crew_approval_refusals (approval_id);
