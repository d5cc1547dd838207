-- A lane's undelivered outbox rows, for the claim's "nothing earlier in this lane is still
-- open" check. With only `outbox_lane (lane, id)` that check visited every earlier row of the
-- lane, sent ones included, so each claim grew with the chat's whole history; this index holds
-- the open rows alone.
CREATE INDEX outbox_lane_open ON outbox (lane, id) WHERE status IN ('pending', 'sending');
