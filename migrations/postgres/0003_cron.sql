-- Cron jobs and the fire ledger (Postgres dialect; same column names and integer epoch-ms
-- timestamps as the SQLite schema, so one SQL text serves both).

-- A job as declared in the config file (source 'config', replaced at each start) or added
-- with `herald cron add` (source 'cli'). `spec` is the job's JSON; `schedule_key` is its
-- schedule and time zone, so a config sync can tell a schedule change (new anchor) from a
-- prompt or target change (same anchor).
CREATE TABLE cron_jobs (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    schedule_key TEXT NOT NULL,
    source TEXT NOT NULL,
    paused BIGINT NOT NULL DEFAULT 0,
    -- Start of the schedule: intervals count from it and no fire before it ever runs.
    anchor_at BIGINT NOT NULL,
    -- Set by `resume`: fires that fell while the job was paused never run.
    resumed_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- One row per scheduled time of a job: the unique (job, scheduled_at) pair is what makes a
-- fire run once, whatever the number of schedulers.
CREATE TABLE cron_fires (
    id BIGSERIAL PRIMARY KEY,
    job TEXT NOT NULL,
    scheduled_at BIGINT NOT NULL,
    manual BIGINT NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    claimed_by TEXT,
    claim_until BIGINT,
    attempts BIGINT NOT NULL DEFAULT 0,
    inbox_id BIGINT,
    started_at BIGINT,
    ended_at BIGINT,
    missed_count BIGINT NOT NULL DEFAULT 0,
    deliveries BIGINT NOT NULL DEFAULT 0,
    note TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (job, scheduled_at)
);
CREATE INDEX cron_fires_status ON cron_fires (status, id);
