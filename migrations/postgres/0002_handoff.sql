-- Handoff capsules, Postgres dialect (same SQL text as SQLite: epoch-ms integers, 0/1 flags).
-- `capsules` keeps every build outcome, including the ones that stored no text (too_short,
-- write_failed), so operators see the last status. `handoff_pending` holds at most one marker
-- per lane: the capsule the lane's next session receives once. `handoff_builds` is the
-- per-lane build claim that keeps two replicas from writing the same capsule twice.

CREATE TABLE capsules (
    id BIGSERIAL PRIMARY KEY,
    lane TEXT NOT NULL,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT NOT NULL,
    message_count BIGINT NOT NULL,
    confidential BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);
CREATE INDEX capsules_lane ON capsules (lane, id);

CREATE TABLE handoff_pending (
    lane TEXT PRIMARY KEY,
    capsule_id BIGINT NOT NULL REFERENCES capsules (id),
    source_session_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE handoff_builds (
    lane TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
