-- Herald schema, Postgres dialect. Timestamps are epoch milliseconds (BIGINT) so that the
-- SQLite schema can use the same SQL text; flags are 0/1 integers for the same reason.

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    parent_id TEXT,
    started_at BIGINT NOT NULL,
    ended_at BIGINT,
    end_reason TEXT,
    system_prompt TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    compaction_strikes BIGINT NOT NULL DEFAULT 0,
    fallback_streak BIGINT NOT NULL DEFAULT 0,
    breaker_blocked_since BIGINT,
    cooldown_until BIGINT,
    prompt_tokens_anchor BIGINT,
    anchor_fingerprint TEXT
);
CREATE INDEX sessions_lane ON sessions (lane, started_at);
CREATE UNIQUE INDEX sessions_one_open_per_lane ON sessions (lane) WHERE ended_at IS NULL;

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    lane TEXT NOT NULL,
    turn_id BIGINT,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    api_content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    active BIGINT NOT NULL DEFAULT 1,
    compacted BIGINT NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);

-- Full-text search: a tsvector column maintained by a trigger that fires only when content
-- changes, so flipping the active/compacted flags costs no tsvector work.
ALTER TABLE messages ADD COLUMN tsv tsvector;
CREATE INDEX messages_tsv ON messages USING GIN (tsv);
CREATE FUNCTION messages_tsv_update() RETURNS trigger AS $$
BEGIN
    NEW.tsv := to_tsvector('simple', NEW.content);
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER messages_tsv_insert BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_tsv_update();
CREATE TRIGGER messages_tsv_update BEFORE UPDATE OF content ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_tsv_update();

CREATE TABLE inbox (
    id BIGSERIAL PRIMARY KEY,
    platform TEXT NOT NULL,
    platform_message_id TEXT NOT NULL,
    lane TEXT NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts BIGINT NOT NULL DEFAULT 0,
    note TEXT,
    session_id TEXT,
    reply_message_id BIGINT,
    received_at BIGINT NOT NULL,
    done_at BIGINT,
    UNIQUE (platform, platform_message_id)
);
CREATE INDEX inbox_lane_status ON inbox (lane, status, id);
CREATE INDEX inbox_status ON inbox (status, id);

CREATE TABLE outbox (
    id BIGSERIAL PRIMARY KEY,
    idem_key TEXT NOT NULL UNIQUE,
    lane TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    reply_to TEXT,
    inbox_id BIGINT,
    chunk_index BIGINT NOT NULL DEFAULT 0,
    text TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts BIGINT NOT NULL DEFAULT 0,
    claimed_by TEXT,
    claim_until BIGINT,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    sent_at BIGINT
);
CREATE INDEX outbox_status ON outbox (status, next_attempt_at, id);
CREATE INDEX outbox_lane ON outbox (lane, id);
CREATE INDEX outbox_inbox ON outbox (inbox_id);

CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    token BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    acquired_at BIGINT NOT NULL
);

CREATE TABLE turns (
    id BIGSERIAL PRIMARY KEY,
    lane TEXT NOT NULL,
    session_id TEXT NOT NULL,
    inbox_id BIGINT,
    holder TEXT NOT NULL,
    token BIGINT NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',
    started_at BIGINT NOT NULL,
    ended_at BIGINT
);
CREATE INDEX turns_lane ON turns (lane, id);

CREATE TABLE kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
