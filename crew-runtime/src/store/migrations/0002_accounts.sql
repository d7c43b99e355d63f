-- Approver accounts of the inbox, their tokens and sign-in sessions.
-- Secrets are never stored: passwords as argon2 hashes, tokens and session
-- ids as their SHA-256.
CREATE TABLE crew_approvers (
    name TEXT PRIMARY KEY,
    password_hash TEXT,
    -- JSON arrays; NULL means no limit.
    tools TEXT,
    capabilities TEXT,
    created_at BIGINT NOT NULL,
    disabled_at BIGINT
);

CREATE TABLE crew_approver_tokens (
    token_hash TEXT PRIMARY KEY,
    approver TEXT NOT NULL,
    -- 'sign-in' (used once) or 'api' (a bearer token).
    kind TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    used_at BIGINT
);

CREATE TABLE crew_sessions (
    id_hash TEXT PRIMARY KEY,
    approver TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
