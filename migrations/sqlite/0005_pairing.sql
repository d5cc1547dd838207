-- Pairing: an unknown user who writes to the bot in a private chat gets a one-time code; the
-- operator approves it and the sender joins the allowlist kept in the store.
CREATE TABLE pairing_requests (
    platform TEXT NOT NULL,
    code TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    last_reply_at INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    PRIMARY KEY (platform, code)
);
CREATE INDEX pairing_sender ON pairing_requests (platform, sender_id, status);

CREATE TABLE approved_senders (
    platform TEXT NOT NULL,
    sender_id TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    approved_at INTEGER NOT NULL,
    code TEXT,
    PRIMARY KEY (platform, sender_id)
);
