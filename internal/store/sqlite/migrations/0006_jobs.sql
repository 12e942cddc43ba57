-- 0006 stores jobs: a document per job, with the columns that queries
-- and the version check need beside it.
CREATE TABLE jobs (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL,
    block_id   TEXT NOT NULL,
    state      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    doc        TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX jobs_by_team ON jobs (team, created_at, id);
CREATE INDEX jobs_open ON jobs (created_at, id) WHERE state NOT IN ('succeeded', 'failed', 'stopped');
