-- The inbox deduplicates a redelivered event on (platform, lane, platform message id), not on
-- (platform, platform message id): a web client id is chosen by the client, so two lanes may
-- both send "1", and the second must not be answered with the first lane's reply. Every
-- existing row stays valid: a key unique without the lane is unique with it.
ALTER TABLE inbox DROP CONSTRAINT inbox_platform_platform_message_id_key;
CREATE UNIQUE INDEX inbox_dedup ON inbox (platform, lane, platform_message_id);
