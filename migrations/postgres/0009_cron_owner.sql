-- A job made in a conversation remembers the person who made it (platform:sender), so each
-- fire can re-check that they may still use the agent; a job paused for that keeps the
-- reason, shown by `herald cron list`.
ALTER TABLE cron_jobs ADD COLUMN owner_person TEXT;
ALTER TABLE cron_jobs ADD COLUMN paused_reason TEXT;
