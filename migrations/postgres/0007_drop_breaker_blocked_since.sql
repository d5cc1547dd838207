-- The wall-clock start of a breaker block, replaced in 0006 by the monotonic accumulator
-- (breaker_blocked_ms, breaker_clock, breaker_clock_ms). 0006 says the column stays because
-- the session row type reads it; that stopped being true with this migration, and 0006 itself
-- cannot be edited (the migrator checksums every applied file). No index, trigger or view
-- names the column.
ALTER TABLE sessions DROP COLUMN breaker_blocked_since;
