-- 0001_init creates capblock's tables. It mirrors the SQLite driver's
-- 0001_init table for table and column for column, in PostgreSQL types:
-- times are timestamptz holding whole seconds, money is bigint minor units
-- plus a currency code, maps and lists are jsonb. The text columns that
-- results are ordered by (ids, names) and node names are COLLATE "C": they
-- sort byte by byte, as SQLite's do, whatever the database's locale, and
-- compare faster in indexes.

-- btree_gist lets one GiST index compare a node name and a GPU index for
-- equality and time ranges for overlap, which the exclusion constraint on
-- allocations needs. It is a trusted extension (PostgreSQL 13 and later):
-- the database's owner may create it without being a superuser.
CREATE EXTENSION IF NOT EXISTS btree_gist;

-- meta holds single values of the server, such as its signing secret.
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value bytea NOT NULL
);

-- blocks holds every block ever bought. placements repeats, as JSON, the
-- GPUs that the allocations rows hold, in the order the core chose them.
CREATE TABLE blocks (
    id            text COLLATE "C" PRIMARY KEY,
    name          text NOT NULL,
    team          text NOT NULL,
    instance_type text NOT NULL,
    gpu_model     text NOT NULL,
    count         integer NOT NULL,
    zone          text NOT NULL,
    start_time    timestamptz NOT NULL,
    end_time      timestamptz NOT NULL,
    state         text NOT NULL,
    fee_minor     bigint NOT NULL,
    fee_currency  text NOT NULL,
    created_at    timestamptz NOT NULL,
    tags          jsonb NOT NULL,
    placements    jsonb NOT NULL,
    warned        boolean NOT NULL,
    terminating   boolean NOT NULL,
    version       bigint NOT NULL
);
CREATE INDEX blocks_by_team ON blocks (team, start_time, id);
CREATE INDEX blocks_by_end ON blocks (end_time);

-- allocations holds one row per (node, GPU index, time range) of a block.
-- live mirrors the block's state (payment-pending, scheduled or active).
--
-- allocations_no_overlap is the database's own guarantee of "no double
-- booking": no two live rows share a GPU over intersecting [start, end)
-- ranges, whatever the application does. Its GiST index also serves the
-- overlap re-check of a commit. It is checked at COMMIT (deferred), like
-- the re-check, on the state that a change leaves behind: one change may
-- move two blocks onto each other's GPUs.
CREATE TABLE allocations (
    block_id text COLLATE "C" NOT NULL REFERENCES blocks (id),
    node     text COLLATE "C" NOT NULL,
    gpu      integer NOT NULL,
    during   tstzrange NOT NULL,
    live     boolean NOT NULL,
    PRIMARY KEY (block_id, node, gpu),
    CONSTRAINT allocations_no_overlap
        EXCLUDE USING gist (node WITH =, gpu WITH =, during WITH &&) WHERE (live)
        DEFERRABLE INITIALLY DEFERRED
);

CREATE TABLE idempotency (
    team         text NOT NULL,
    client_token text NOT NULL,
    request_hash text NOT NULL,
    subject      text NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (team, client_token)
);

CREATE TABLE ledger (
    id           text COLLATE "C" PRIMARY KEY,
    team         text NOT NULL,
    time         timestamptz NOT NULL,
    kind         text NOT NULL,
    amount_minor bigint NOT NULL,
    currency     text NOT NULL,
    subject      text NOT NULL
);
CREATE INDEX ledger_by_team ON ledger (team, time, id);

-- events is the audit log; seq is the cursor that readers follow and is
-- never reused. Its sequence must not cache values per session (the
-- default), or seq would not follow the order in which commits take it.
CREATE TABLE events (
    seq     bigserial PRIMARY KEY,
    id      text NOT NULL,
    time    timestamptz NOT NULL,
    type    text NOT NULL,
    subject text NOT NULL,
    team    text NOT NULL,
    data    jsonb NOT NULL
);
