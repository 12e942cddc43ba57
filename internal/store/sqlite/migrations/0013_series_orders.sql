-- 0013_series_orders adds recurring blocks (series) and standing orders.
-- A series' occurrences are ordinary blocks; series_blocks says which.
-- Its state is derived from theirs when read, so it has no column.
CREATE TABLE series (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL,
    team           TEXT NOT NULL,
    instance_type  TEXT NOT NULL,
    instance_count INTEGER NOT NULL,
    zone           TEXT NOT NULL,
    time_zone      TEXT NOT NULL,
    days           TEXT NOT NULL,
    start_local    TEXT NOT NULL,
    end_local      TEXT NOT NULL,
    first_date     TEXT NOT NULL,
    last_date      TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    fee_minor      INTEGER NOT NULL,
    fee_currency   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX series_by_team ON series (team, created_at, id);

CREATE TABLE series_blocks (
    series_id TEXT NOT NULL,
    block_id  TEXT NOT NULL,
    PRIMARY KEY (series_id, block_id)
) WITHOUT ROWID;

-- orders are standing requests for a block, served oldest first.
CREATE TABLE orders (
    id               TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    team             TEXT NOT NULL,
    mode             TEXT NOT NULL,
    instance_type    TEXT NOT NULL,
    instance_count   INTEGER NOT NULL,
    zone             TEXT NOT NULL,
    duration_hours   INTEGER NOT NULL,
    start_after      INTEGER NOT NULL,
    end_before       INTEGER NOT NULL,
    deadline         INTEGER NOT NULL,
    max_fee_minor    INTEGER NOT NULL,
    max_fee_currency TEXT NOT NULL,
    state            TEXT NOT NULL,
    block_id         TEXT NOT NULL,
    reason           TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    version          INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX orders_by_state ON orders (state, created_at, id);
CREATE INDEX orders_by_team ON orders (team, created_at, id);
