-- A lane holds one pending handoff marker per agent: a capsule made with one agent waits for
-- that agent's next session in the lane, and a capsule of another agent does not replace it.
-- Each existing marker takes the agent of the capsule it points at.
ALTER TABLE handoff_pending ADD COLUMN agent TEXT NOT NULL DEFAULT 'default';
UPDATE handoff_pending p SET agent = c.agent FROM capsules c WHERE c.id = p.capsule_id;
ALTER TABLE handoff_pending DROP CONSTRAINT handoff_pending_pkey;
ALTER TABLE handoff_pending ADD PRIMARY KEY (lane, agent);
