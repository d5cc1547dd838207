-- Files a transcript row carries, by reference (kind, source, MIME type, size, hash): a JSON
-- list, NULL when there are none. The bytes are never stored here; a turn refetches them.
ALTER TABLE messages ADD COLUMN media TEXT;
