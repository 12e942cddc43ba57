-- 0014 stores hand-overs of blocks' hours: transfers to another team and
-- releases for resale, with what has been resold and credited. A document
-- per hand-over, with the columns that queries and the version check
-- need beside it. Utilisation needs no table: it is computed from blocks,
-- jobs and job events.
CREATE TABLE handovers (
    id               text COLLATE "C" PRIMARY KEY,
    kind             text NOT NULL,
    block_id         text COLLATE "C" NOT NULL,
    to_block_id      text COLLATE "C" NOT NULL,
    team             text COLLATE "C" NOT NULL,
    gpu_model        text COLLATE "C" NOT NULL,
    from_time        timestamptz NOT NULL,
    until_time       timestamptz NOT NULL,
    gpu_hours        bigint NOT NULL,
    resold_gpu_hours bigint NOT NULL,
    version          bigint NOT NULL,
    doc              text NOT NULL
);
CREATE INDEX handovers_by_block ON handovers (block_id);
CREATE INDEX handovers_by_to_block ON handovers (to_block_id) WHERE to_block_id <> '';
CREATE INDEX handovers_open ON handovers (gpu_model, until_time) WHERE kind = 'release' AND resold_gpu_hours < gpu_hours;
