-- What the platform reported about a message it took (WhatsApp's status callbacks): `sent`,
-- `delivered`, `read` or `failed`, only ever moving forward; NULL where the platform reports
-- nothing. Callbacks name the message by its platform id, hence the index.
ALTER TABLE outbox ADD COLUMN delivery TEXT;
CREATE INDEX outbox_platform_message ON outbox (platform_message_id);
