-- 0010 stores the engine's side of capblock: the outbox of engine actions
-- that commits write and the leader's worker applies, and the recorded
-- health of nodes. It mirrors the SQLite driver's 0010. Its times keep
-- their microseconds: a retry's backoff may be shorter than a second.

-- actions is the outbox. seq numbers the actions in the order they were
-- stored, which is the order in which a subject's actions run: commits
-- that act on one subject are serialized by its row's lock (the block's,
-- the job's), so its actions take their seq in commit order.
CREATE TABLE actions (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text COLLATE "C" NOT NULL UNIQUE,
    kind       text NOT NULL,
    subject    text COLLATE "C" NOT NULL,
    team       text COLLATE "C" NOT NULL,
    payload    bytea NOT NULL,
    state      text NOT NULL,
    attempts   integer NOT NULL,
    next_at    timestamptz NOT NULL,
    last_error text NOT NULL,
    created_at timestamptz NOT NULL,
    done_at    timestamptz -- NULL while pending
);
-- actions_due holds the pending actions only, in the order DueActions
-- returns them, so that it reads the due ones and stops at its limit.
CREATE INDEX actions_due ON actions (next_at, created_at, id) WHERE state = 'pending';
-- actions_by_subject finds an action's older pending ones (DueActions)
-- and a subject's actions (ActionsFor).
CREATE INDEX actions_by_subject ON actions (subject, seq);
-- actions_done finds the done actions to prune, and actions_failed counts
-- the failed ones, without reading the others (actions_due counts the
-- pending ones).
CREATE INDEX actions_done ON actions (done_at) WHERE state = 'done';
CREATE INDEX actions_failed ON actions (seq) WHERE state = 'failed';

-- node_health holds one record per node whose health was ever recorded;
-- a node without one is healthy.
CREATE TABLE node_health (
    node   text COLLATE "C" PRIMARY KEY,
    health text NOT NULL,
    reason text NOT NULL,
    since  timestamptz NOT NULL,
    source text NOT NULL
);
