-- 0001_init creates capblock's tables. Times are INTEGER unix seconds (UTC),
-- money is INTEGER minor units plus a currency code, maps and lists are JSON
-- text.

-- meta holds single values of the server, such as its signing secret.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
) WITHOUT ROWID;

-- blocks holds every block ever bought. placements repeats, as JSON, the
-- GPUs that the allocations rows hold, in the order the core chose them.
CREATE TABLE blocks (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    team          TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    gpu_model     TEXT NOT NULL,
    count         INTEGER NOT NULL,
    zone          TEXT NOT NULL,
    start_time    INTEGER NOT NULL,
    end_time      INTEGER NOT NULL,
    state         TEXT NOT NULL,
    fee_minor     INTEGER NOT NULL,
    fee_currency  TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    tags          TEXT NOT NULL,
    placements    TEXT NOT NULL,
    warned        INTEGER NOT NULL,
    terminating   INTEGER NOT NULL,
    version       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX blocks_by_team ON blocks (team, start_time, id);
CREATE INDEX blocks_by_end ON blocks (end_time);

-- allocations holds one row per (node, GPU index, time range) of a block.
-- live mirrors the block's state (payment-pending, scheduled or active) so
-- that the overlap re-check of a commit reads only the partial index below,
-- which holds the allocations that still count as taken.
CREATE TABLE allocations (
    block_id   TEXT NOT NULL REFERENCES blocks (id),
    node       TEXT NOT NULL,
    gpu        INTEGER NOT NULL,
    start_time INTEGER NOT NULL,
    end_time   INTEGER NOT NULL,
    live       INTEGER NOT NULL,
    PRIMARY KEY (block_id, node, gpu)
) WITHOUT ROWID;
CREATE INDEX allocations_taken ON allocations (node, gpu, end_time) WHERE live = 1;

CREATE TABLE idempotency (
    team         TEXT NOT NULL,
    client_token TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    subject      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (team, client_token)
) WITHOUT ROWID;

CREATE TABLE ledger (
    id           TEXT PRIMARY KEY,
    team         TEXT NOT NULL,
    time         INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    amount_minor INTEGER NOT NULL,
    currency     TEXT NOT NULL,
    subject      TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX ledger_by_team ON ledger (team, time, id);

-- events is the audit log; seq is the cursor that readers follow and is
-- never reused.
CREATE TABLE events (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    id      TEXT NOT NULL,
    time    INTEGER NOT NULL,
    type    TEXT NOT NULL,
    subject TEXT NOT NULL,
    team    TEXT NOT NULL,
    data    TEXT NOT NULL
);
