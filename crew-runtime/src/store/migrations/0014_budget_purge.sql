-- Budgets' reservations are kept a week (for a resumed call's "reserved
-- before" and a late settlement), then purged: found by their age.
CREATE INDEX crew_budget_reservations_created ON crew_budget_reservations (created_at);
