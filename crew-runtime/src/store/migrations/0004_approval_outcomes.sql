-- What became of an answered question, and when a question was closed.
-- taken_at: when the waiting process took the answer (an approval nobody
--   took before the lease ran out approved nothing: it is abandoned).
-- closed_at: when it was closed without an answer (expired, abandoned,
--   withdrawn), or abandoned after an answer nobody took.
-- audit_trail: the trail its process records on, so that whichever
--   process finds it abandoned records that on the same trail.
-- outcome: what the call did after the answer: 'ran', 'failed' or
--   'refused', with who refused it and why (or the error), and when.
ALTER TABLE crew_approvals ADD COLUMN taken_at BIGINT;
ALTER TABLE crew_approvals ADD COLUMN closed_at BIGINT;
ALTER TABLE crew_approvals ADD COLUMN audit_trail TEXT;
ALTER TABLE crew_approvals ADD COLUMN outcome TEXT;
ALTER TABLE crew_approvals ADD COLUMN outcome_source TEXT;
ALTER TABLE crew_approvals ADD COLUMN outcome_detail TEXT;
ALTER TABLE crew_approvals ADD COLUMN outcome_at BIGINT;
