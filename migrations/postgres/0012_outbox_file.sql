-- A row that sends a file: the file's reference (an attachment as JSON: kind, source, MIME
-- type, size, name, hash), NULL for a text row. The bytes stay in the media cache.
ALTER TABLE outbox ADD COLUMN media TEXT;
