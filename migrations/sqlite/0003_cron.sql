-- Cron jobs and the fire ledger (SQLite dialect; same column names and integer epoch-ms
-- timestamps as the Postgres schema, so one SQL text serves both).

-- A job as declared in the config file (source 'config', replaced at each start) or added
-- with `herald cron add` (source 'cli'). `spec` is the job's JSON; `schedule_key` is its
-- schedule and time zone, so a config sync can tell a schedule change (new anchor) from a
-- prompt or target change (same anchor).
CREATE TABLE cron_jobs (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    schedule_key TEXT NOT NULL,
    source TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    -- Start of the schedule: intervals count from it and no fire before it ever runs.
    anchor_at INTEGER NOT NULL,
    -- Set by `resume`: fires that fell while the job was paused never run.
    resumed_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- One row per scheduled time of a job: the unique (job, scheduled_at) pair is what makes a
-- fire run once, whatever the number of schedulers.
CREATE TABLE cron_fires (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    manual INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    claimed_by TEXT,
    claim_until INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    inbox_id INTEGER,
    started_at INTEGER,
    ended_at INTEGER,
    missed_count INTEGER NOT NULL DEFAULT 0,
    deliveries INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (job, scheduled_at)
);
CREATE INDEX cron_fires_status ON cron_fires (status, id);
