-- 0016_lending records whether a block's holder lends its idle GPUs to
-- backfill, as the sqlite driver's 0016_lending does.
ALTER TABLE blocks ADD COLUMN lending boolean NOT NULL DEFAULT false;
