-- Approvers' e-mail addresses (SPEC §14): the e-mail channel sends a
-- question, with a signed link, to the approvers whose scope covers it
-- and who have an address. NULL: no e-mail.
ALTER TABLE crew_approvers ADD COLUMN email TEXT;
