-- 0006 stores jobs: a document per job, with the columns that queries
-- and the version check need beside it.
CREATE TABLE jobs (
    id         text COLLATE "C" PRIMARY KEY,
    team       text COLLATE "C" NOT NULL,
    block_id   text COLLATE "C" NOT NULL,
    state      text NOT NULL,
    created_at timestamptz NOT NULL,
    version    bigint NOT NULL,
    doc        text NOT NULL
);
CREATE INDEX jobs_by_team ON jobs (team, created_at, id);
CREATE INDEX jobs_open ON jobs (created_at, id) WHERE state NOT IN ('succeeded', 'failed', 'stopped');
