-- The process that held an approved call when its outcome was recorded
-- (a durable kickoff's owner: for a parked kickoff, the replica that
-- resumed it), shown by the inbox beside the outcome. NULL when the
-- process did not name itself, and for outcomes recorded before.
ALTER TABLE crew_approvals ADD COLUMN outcome_by TEXT;
