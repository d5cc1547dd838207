-- Every spend row names its payer: `person` (the `person` column says who) or `system` (the
-- operator's config and CLI cron jobs, Herald's own background work). Rows written before
-- this keep a NULL payer and read as "not recorded"; a person's rows are marked as such.
ALTER TABLE spend ADD COLUMN payer TEXT;
UPDATE spend SET payer = 'person' WHERE person IS NOT NULL;
