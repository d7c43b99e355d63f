-- Announcements of questions on the channels where approvers are (SPEC
-- §14): an outbox. Each channel an announcer delivers on is named here
-- (its kind only; its URL, token or secret stay in the announcer's
-- configuration), and a new question is written with one announcement
-- per channel, in the same transaction. Any replica delivers them.
CREATE TABLE crew_channels (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    disabled_at BIGINT
);

-- told: the question's status the channel was last told (NULL: not yet
--   announced). An announcement is due while it differs from the
--   question's status: asked, then answered, expired or withdrawn.
-- attempts, next_at: the failed attempts in a row, and when to try next
--   (backoff, or what the channel asked for, as Slack's Retry-After).
-- holder, held_until: the replica delivering it now; another takes it
--   over only once held_until has passed.
-- reference: what the channel answered (a Slack message's place), for
--   the updates.
-- gave_up_at: delivery stopped after too many failures; the question
--   still waits in the inbox.
CREATE TABLE crew_announcements (
    question_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    told TEXT,
    attempts BIGINT NOT NULL,
    next_at BIGINT NOT NULL,
    holder TEXT,
    held_until BIGINT NOT NULL,
    last_error TEXT,
    reference TEXT,
    gave_up_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (question_id, channel)
);

CREATE INDEX crew_announcements_due ON crew_announcements (gave_up_at, next_at);

-- Approvers' Slack identities (`crew-inbox link-slack`): a click on a
-- Slack button decides as the approver its (team, user) is linked to, and
-- a question is sent to the linked approvers whose scope covers it.
CREATE TABLE crew_slack_links (
    team_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    approver TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);

CREATE INDEX crew_slack_links_by_approver ON crew_slack_links (approver);

-- Slack requests the inbox accepted, by their signature, for the five
-- minutes a signature is valid: a request replayed on any replica within
-- them is refused.
CREATE TABLE crew_slack_requests (
    signature TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);

CREATE INDEX crew_slack_requests_by_time ON crew_slack_requests (seen_at);

-- Signed links (SPEC §14). links_valid_after: links issued to the
-- approver before it are dead. one_click_links: 1 when the approver opted
-- in to links that decide without a sign-in.
ALTER TABLE crew_approvers ADD COLUMN links_valid_after BIGINT NOT NULL DEFAULT 0;
ALTER TABLE crew_approvers ADD COLUMN one_click_links BIGINT NOT NULL DEFAULT 0;

-- Each link decides once, on any replica: the SHA-256 of the used ones.
CREATE TABLE crew_used_links (
    token_hash TEXT PRIMARY KEY,
    question_id TEXT NOT NULL,
    used_at BIGINT NOT NULL
);

-- Link keys revoked (`crew-inbox revoke-key`): their links are dead at
-- once on every replica, whatever the key files still hold.
CREATE TABLE crew_revoked_link_keys (
    key_id TEXT PRIMARY KEY,
    revoked_at BIGINT NOT NULL
);

-- Where a question's answer came from: the inbox's pages, its JSON API,
-- Slack, a signed link (NULL: through the library directly, or before).
ALTER TABLE crew_approvals ADD COLUMN answered_via TEXT;
