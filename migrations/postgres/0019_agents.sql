-- Several agents in one gateway: each session, capsule and spend row names the agent that
-- made it. Rows written before this belong to the default agent (`[agent]` and `[llm]`).
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
ALTER TABLE capsules ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
ALTER TABLE spend ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
CREATE INDEX spend_agent ON spend (agent, day);
