-- Budgets: one row per model call in the spend ledger, reserved (held) before the call and
-- settled to its bill after; caps read sums of it. Amounts are in billionths of the configured
-- currency. `day` and `month` are the call's period in the budget's timezone.
CREATE TABLE spend (
    id BIGSERIAL PRIMARY KEY,
    at BIGINT NOT NULL,
    day TEXT NOT NULL,
    month TEXT NOT NULL,
    lane TEXT NOT NULL,
    person TEXT,
    job TEXT,
    run TEXT,
    cause TEXT NOT NULL,
    model TEXT NOT NULL,
    state TEXT NOT NULL,
    held BIGINT NOT NULL,
    cost BIGINT,
    fresh_input BIGINT NOT NULL DEFAULT 0,
    output BIGINT NOT NULL DEFAULT 0,
    cache_read BIGINT NOT NULL DEFAULT 0,
    cache_write BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT NOT NULL
);
CREATE INDEX spend_day ON spend (day);
CREATE INDEX spend_month ON spend (month);
CREATE INDEX spend_person ON spend (person, day);
CREATE INDEX spend_run ON spend (run);

-- A cap raised for one period by an approver ("spend up to X more today on …").
CREATE TABLE budget_grants (
    id BIGSERIAL PRIMARY KEY,
    cap TEXT NOT NULL,
    period TEXT NOT NULL,
    amount BIGINT NOT NULL,
    granted_by TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX budget_grants_cap ON budget_grants (cap, period);

-- One row per (cap, period, kind) notice sent, so approvers hear of a cap once per period.
CREATE TABLE budget_notices (
    cap TEXT NOT NULL,
    period TEXT NOT NULL,
    kind TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (cap, period, kind)
);

-- Every reservation updates this one row first: replicas racing one cap take turns.
CREATE TABLE budget_lock (
    id BIGINT PRIMARY KEY,
    n BIGINT NOT NULL
);
INSERT INTO budget_lock (id, n) VALUES (1, 0);

-- Each turn's billed usage (four disjoint buckets) and its cost (NULL: unknown or unpriced).
ALTER TABLE turns ADD COLUMN fresh_input BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN output BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN cache_read BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN cache_write BIGINT NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN cost BIGINT;
