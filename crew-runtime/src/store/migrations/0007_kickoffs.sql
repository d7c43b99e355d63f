-- Durable kickoffs (SPEC §13): one row per kickoff, and its write-ahead
-- journal. Portable SQL, as the other migrations: times are milliseconds
-- since the Unix epoch, always read from the database's clock (leases are
-- never compared with a process's clock); BYTEA is PostgreSQL's binary
-- type, and SQLite stores the same blobs under that name unchanged.
--
-- owner, epoch, lease_until: the lease. Every write of the holder is
--   conditional on (owner, epoch) being current and lease_until not past;
--   each claim adds one to epoch, which fences off the previous holder.
-- step: the sequence number of the last journal entry (0: none).
-- wake: 1 when an answer arrived while the kickoff was running: parking
--   it then makes it ready at once instead of parked.
-- key_check: an empty message sealed with the journal's key, bound to the
--   kickoff's id: tells a wrong key from a changed entry.
-- finished_at: when it ended (completed, failed, cancelled, in_doubt);
--   purged_at: when its journal was removed (the row stays).
CREATE TABLE crew_kickoffs (
    id TEXT PRIMARY KEY,
    crew TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    lease_until BIGINT NOT NULL,
    step BIGINT NOT NULL,
    wake BIGINT NOT NULL,
    key_check BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    finished_at BIGINT,
    purged_at BIGINT
);

-- What a resumer looks for: ready kickoffs, and running ones whose lease
-- ran out.
CREATE INDEX crew_kickoffs_claimable ON crew_kickoffs (status, lease_until);
CREATE INDEX crew_kickoffs_by_creation ON crew_kickoffs (created_at, id);

-- The journal: payloads sealed (XChaCha20-Poly1305), each bound to its
-- kickoff, sequence number and kind. kind is in clear (what was recorded,
-- never what it holds).
CREATE TABLE crew_journal (
    kickoff_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    payload BYTEA NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (kickoff_id, seq)
);
