-- The audit trail: append-only records, each holding the SHA-256 of the
-- record before it in its trail (a hash chain). `data` is the record's
-- canonical JSON. A head's row is what the writers of a trail lock to take
-- turns; the chain's end is read from the records, and `verify` trusts
-- nothing but the records.
CREATE TABLE crew_audit (
    trail TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (trail, seq)
);

CREATE TABLE crew_audit_heads (
    trail TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);
