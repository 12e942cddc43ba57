-- 0020 keeps the W3C trace context of the decision that stored them
-- (empty when it was not traced) with each engine action, so that the
-- replica that applies it, later, continues that trace; and with each
-- block, so that its activation, decided at its start, continues the
-- trace of its purchase.
ALTER TABLE actions ADD COLUMN trace TEXT NOT NULL DEFAULT '';
ALTER TABLE blocks ADD COLUMN trace TEXT NOT NULL DEFAULT '';
