-- Failed sign-ins, per account and per client address, shared by every
-- replica of the inbox: after a few failures each further attempt of that
-- key is refused until `locked_until` (an exponentially growing, capped
-- delay). Keys are SHA-256 hashes of 'account:<identity>' or
-- 'address:<ip>', so the table holds no names or addresses in clear.
CREATE TABLE crew_sign_in_throttle (
    key_hash TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    last_failure_at BIGINT NOT NULL,
    locked_until BIGINT NOT NULL
);
