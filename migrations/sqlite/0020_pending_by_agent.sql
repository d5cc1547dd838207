-- A lane holds one pending handoff marker per agent: a capsule made with one agent waits for
-- that agent's next session in the lane, and a capsule of another agent does not replace it.
-- SQLite cannot change a primary key in place, so the table is rebuilt; each existing marker
-- takes the agent of the capsule it points at.
CREATE TABLE handoff_pending_by_agent (
    lane TEXT NOT NULL,
    agent TEXT NOT NULL DEFAULT 'default',
    capsule_id INTEGER NOT NULL REFERENCES capsules (id),
    source_session_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (lane, agent)
);
INSERT INTO handoff_pending_by_agent (lane, agent, capsule_id, source_session_id, created_at)
    SELECT p.lane, c.agent, p.capsule_id, p.source_session_id, p.created_at
    FROM handoff_pending p JOIN capsules c ON c.id = p.capsule_id;
DROP TABLE handoff_pending;
ALTER TABLE handoff_pending_by_agent RENAME TO handoff_pending;
