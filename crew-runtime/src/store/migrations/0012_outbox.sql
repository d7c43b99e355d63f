-- The outbox of changes (SPEC §14): a question whose status or outcome
-- changed is queued here, atomically with the change, whichever statement
-- made it (a trigger), when channels are in use; an announcer takes it
-- (deleting the row) and wakes its announcements, which rest once told
-- what their question is. A new question needs no row: it is pending, and
-- the announcers find the pending questions not announced yet through
-- the index on (status, created_at), so asking writes nothing more.
CREATE TABLE crew_outbox (
    question_id TEXT PRIMARY KEY
) WITHOUT ROWID;

-- When any channel was ever named: a channel disabled since still hears
-- what became of the questions it was told of.
CREATE TRIGGER crew_outbox_changed AFTER UPDATE OF status, outcome ON crew_approvals
WHEN (OLD.status IS NOT NEW.status OR OLD.outcome IS NOT NEW.outcome)
    AND EXISTS (SELECT 1 FROM crew_channels)
BEGIN
    INSERT OR IGNORE INTO crew_outbox (question_id) VALUES (NEW.id);
END;

-- An announcement told what its question is now rests (next_at at the
-- largest time) until its question changes: the announcers' scan for due
-- work reads only what is due, not every announcement ever made.
UPDATE crew_announcements SET next_at = 9223372036854775807
WHERE told IS NOT NULL AND told = (SELECT q.status || COALESCE('/' || q.outcome, '')
                                   FROM crew_approvals q WHERE q.id = question_id);
