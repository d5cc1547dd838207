-- The reply an outbox row is a chunk of, stored as its own column (the sender used to take it
-- back out of idem_key's text). idem_key itself is unchanged: it stays the row's unique key.
ALTER TABLE outbox ADD COLUMN reply_key TEXT;

-- Rows still to be sent carry their reply too: everything before the last ':' of their key
-- (rtrim with every character of the key but ':' strips the last segment and leaves its ':').
-- Sent and failed rows are never read by their reply, so they are left as they are, and a key
-- without ':' has no reply.
UPDATE outbox
SET reply_key = NULLIF(
    substr(rtrim(idem_key, replace(idem_key, ':', '')), 1,
           length(rtrim(idem_key, replace(idem_key, ':', ''))) - 1),
    '')
WHERE status IN ('pending', 'sending') AND idem_key LIKE '%:%';
