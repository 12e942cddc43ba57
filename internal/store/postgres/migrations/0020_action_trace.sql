-- 0020 keeps, with each engine action, the W3C trace context of the
-- decision that stored it (empty when it was not traced), so that the
-- replica that applies it, later, continues that trace.
ALTER TABLE actions ADD COLUMN trace TEXT NOT NULL DEFAULT '';
