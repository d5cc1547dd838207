-- The id an API response is known by outside (`resp_…`, `chatcmpl-…`): random, so it says
-- nothing about how many requests came before; NULL until a response names the row.
ALTER TABLE inbox ADD COLUMN public_id TEXT;
CREATE UNIQUE INDEX inbox_public_id ON inbox (public_id);
