-- Budgets' counters (SPEC §15), shared by every replica on the store.
-- counter: the budget, what it counts per (a user, a kickoff…) and its
--   window, as one name. slice: the slice of the window (0 for a budget's
--   lifetime, the day for a calendar day, a sixtieth of a rolling window).
-- used: what was reserved and settled in the slice. A reservation is one
--   conditional upsert: counted only if the slice then holds at most the
--   limit.
CREATE TABLE crew_budget_counters (
    counter TEXT NOT NULL,
    slice BIGINT NOT NULL,
    used BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (counter, slice)
);

-- What each call reserved, by its id (its idempotency key in a durable
-- kickoff): a call reserving again is counted once. cost: what it cost,
-- once settled (NULL: not settled, charged in full; a call whose process
-- died stays so, since it may have been billed).
CREATE TABLE crew_budget_reservations (
    call_id TEXT NOT NULL,
    counter TEXT NOT NULL,
    slice BIGINT NOT NULL,
    budget TEXT NOT NULL,
    amount BIGINT NOT NULL,
    cost BIGINT,
    created_at BIGINT NOT NULL,
    settled_at BIGINT,
    PRIMARY KEY (call_id, counter)
);
