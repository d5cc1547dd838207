-- The inbox deduplicates a redelivered event on (platform, lane, platform message id), not on
-- (platform, platform message id): a web client id is chosen by the client, so two lanes may
-- both send "1", and the second must not be answered with the first lane's reply. Every
-- existing row stays valid: a key unique without the lane is unique with it.
--
-- SQLite cannot drop a table's UNIQUE constraint, so the table is rebuilt with its ids, and
-- its AUTOINCREMENT high-water mark is carried over so no id is ever handed out twice.
CREATE TABLE inbox_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    platform TEXT NOT NULL,
    platform_message_id TEXT NOT NULL,
    lane TEXT NOT NULL,
    event TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    session_id TEXT,
    reply_message_id INTEGER,
    received_at INTEGER NOT NULL,
    done_at INTEGER,
    UNIQUE (platform, lane, platform_message_id)
);
INSERT INTO inbox_new (id, platform, platform_message_id, lane, event, status, attempts, note,
                       session_id, reply_message_id, received_at, done_at)
    SELECT id, platform, platform_message_id, lane, event, status, attempts, note,
           session_id, reply_message_id, received_at, done_at
    FROM inbox;
DELETE FROM sqlite_sequence WHERE name = 'inbox_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'inbox_new', seq FROM sqlite_sequence WHERE name = 'inbox';
DROP TABLE inbox;
ALTER TABLE inbox_new RENAME TO inbox;
CREATE INDEX inbox_lane_status ON inbox (lane, status, id);
CREATE INDEX inbox_status ON inbox (status, id);
