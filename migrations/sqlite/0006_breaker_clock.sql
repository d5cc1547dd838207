-- The compaction breaker measures a block on monotonic clocks instead of the wall clock (an
-- NTP step must not end a block early). Readings of two processes cannot be subtracted, so the
-- row keeps the block accumulated so far, the process that took the last reading, and that
-- reading. A session blocked under the old scheme stays blocked, counted from zero.
-- breaker_blocked_since is no longer written; it stays because the session row type still
-- reads it.
ALTER TABLE sessions ADD COLUMN breaker_blocked_ms INTEGER;
ALTER TABLE sessions ADD COLUMN breaker_clock TEXT;
ALTER TABLE sessions ADD COLUMN breaker_clock_ms INTEGER;
UPDATE sessions SET breaker_blocked_ms = 0, breaker_blocked_since = NULL
    WHERE breaker_blocked_since IS NOT NULL;
