-- 0010 stores the engine's side of capblock: the outbox of engine actions
-- that commits write and the leader's worker applies, and the recorded
-- health of nodes. Their times are unix microseconds: a retry's backoff
-- may be shorter than a second.

-- actions is the outbox. seq (the rowid) numbers the actions in the order
-- they were stored, which is the order in which a subject's actions run;
-- a new rowid is always above every stored one, pruned rows or not.
CREATE TABLE actions (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    subject    TEXT NOT NULL,
    team       TEXT NOT NULL,
    payload    BLOB NOT NULL,
    state      TEXT NOT NULL,
    attempts   INTEGER NOT NULL,
    next_at    INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    done_at    INTEGER -- NULL while pending
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
    node   TEXT PRIMARY KEY,
    health TEXT NOT NULL,
    reason TEXT NOT NULL,
    since  INTEGER NOT NULL,
    source TEXT NOT NULL
) WITHOUT ROWID;
