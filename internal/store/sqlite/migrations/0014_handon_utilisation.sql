-- 0014 stores hand-overs of blocks' hours: transfers to another team and
-- releases for resale, with what has been resold and credited. A document
-- per hand-over, with the columns that queries and the version check
-- need beside it. Utilisation needs no table: it is computed from blocks,
-- jobs and job events.
CREATE TABLE handovers (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    block_id         TEXT NOT NULL,
    to_block_id      TEXT NOT NULL,
    team             TEXT NOT NULL,
    gpu_model        TEXT NOT NULL,
    from_time        INTEGER NOT NULL,
    until_time       INTEGER NOT NULL,
    gpu_hours        INTEGER NOT NULL,
    resold_gpu_hours INTEGER NOT NULL,
    version          INTEGER NOT NULL,
    doc              TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX handovers_by_block ON handovers (block_id);
CREATE INDEX handovers_by_to_block ON handovers (to_block_id) WHERE to_block_id <> '';
CREATE INDEX handovers_open ON handovers (gpu_model, until_time) WHERE kind = 'release' AND resold_gpu_hours < gpu_hours;
