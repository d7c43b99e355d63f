-- Why a question is asked, in plain words (a policy's @ask text, a gate's
-- message), shown by the inbox and chat channels beside the call instead
-- of the terminal wording of `prompt`. NULL for questions asked before.
ALTER TABLE crew_approvals ADD COLUMN reason TEXT;
