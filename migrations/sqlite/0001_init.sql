-- Herald schema, SQLite dialect. Timestamps are epoch milliseconds (INTEGER) so that the
-- Postgres schema can use the same SQL text; flags are 0/1 integers for the same reason.

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    parent_id TEXT,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    end_reason TEXT,
    system_prompt TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    compaction_strikes INTEGER NOT NULL DEFAULT 0,
    fallback_streak INTEGER NOT NULL DEFAULT 0,
    breaker_blocked_since INTEGER,
    cooldown_until INTEGER,
    prompt_tokens_anchor INTEGER,
    anchor_fingerprint TEXT
);
CREATE INDEX sessions_lane ON sessions (lane, started_at);
CREATE UNIQUE INDEX sessions_one_open_per_lane ON sessions (lane) WHERE ended_at IS NULL;

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    lane TEXT NOT NULL,
    turn_id INTEGER,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    api_content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);

-- External-content FTS5 index: only inserts and content updates touch it, so flipping the
-- active/compacted flags costs no index work.
CREATE VIRTUAL TABLE messages_fts USING fts5 (content, content = 'messages', content_rowid = 'id');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    platform TEXT NOT NULL,
    platform_message_id TEXT NOT NULL,
    lane TEXT NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    session_id TEXT,
    reply_message_id INTEGER,
    received_at INTEGER NOT NULL,
    done_at INTEGER,
    UNIQUE (platform, platform_message_id)
);
CREATE INDEX inbox_lane_status ON inbox (lane, status, id);
CREATE INDEX inbox_status ON inbox (status, id);

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    idem_key TEXT NOT NULL UNIQUE,
    lane TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    reply_to TEXT,
    inbox_id INTEGER,
    chunk_index INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT,
    claim_until INTEGER,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    last_error TEXT,
    created_at INTEGER NOT NULL,
    sent_at INTEGER
);
CREATE INDEX outbox_status ON outbox (status, next_attempt_at, id);
CREATE INDEX outbox_lane ON outbox (lane, id);
CREATE INDEX outbox_inbox ON outbox (inbox_id);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL
);

CREATE TABLE turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    lane TEXT NOT NULL,
    session_id TEXT NOT NULL,
    inbox_id INTEGER,
    holder TEXT NOT NULL,
    token INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    started_at INTEGER NOT NULL,
    ended_at INTEGER
);
CREATE INDEX turns_lane ON turns (lane, id);

CREATE TABLE kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
