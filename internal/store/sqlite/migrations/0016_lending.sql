-- 0016_lending records whether a block's holder lends its idle GPUs to
-- backfill (preemptible jobs) while the holder runs no job on it.
ALTER TABLE blocks ADD COLUMN lending INTEGER NOT NULL DEFAULT 0;
