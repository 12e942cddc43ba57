-- 0013_series_orders adds recurring blocks (series) and standing orders,
-- as the SQLite driver's 0013_series_orders does.
-- A series' occurrences are ordinary blocks; series_blocks says which.
-- Its state is derived from theirs when read, so it has no column.
CREATE TABLE series (
    id             text COLLATE "C" PRIMARY KEY,
    name           text NOT NULL,
    team           text NOT NULL,
    instance_type  text NOT NULL,
    instance_count bigint NOT NULL,
    zone           text NOT NULL,
    time_zone      text NOT NULL,
    days           text NOT NULL,
    start_local    text NOT NULL,
    end_local      text NOT NULL,
    first_date     text NOT NULL,
    last_date      text NOT NULL,
    created_at     timestamptz NOT NULL,
    fee_minor      bigint NOT NULL,
    fee_currency   text NOT NULL
);
CREATE INDEX series_by_team ON series (team, created_at, id);

CREATE TABLE series_blocks (
    series_id text NOT NULL,
    block_id  text NOT NULL,
    PRIMARY KEY (series_id, block_id)
);

-- orders are standing requests for a block, served oldest first.
CREATE TABLE orders (
    id               text COLLATE "C" PRIMARY KEY,
    name             text NOT NULL,
    team             text NOT NULL,
    mode             text NOT NULL,
    instance_type    text NOT NULL,
    instance_count   bigint NOT NULL,
    zone             text NOT NULL,
    duration_hours   bigint NOT NULL,
    start_after      timestamptz NOT NULL,
    end_before       timestamptz NOT NULL,
    deadline         timestamptz NOT NULL,
    max_fee_minor    bigint NOT NULL,
    max_fee_currency text NOT NULL,
    state            text NOT NULL,
    block_id         text NOT NULL,
    reason           text NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    version          bigint NOT NULL
);
CREATE INDEX orders_by_state ON orders (state, created_at, id);
CREATE INDEX orders_by_team ON orders (team, created_at, id);
