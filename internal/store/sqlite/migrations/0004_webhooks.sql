-- 0004_webhooks adds the teams' webhooks, their delivery log and the
-- delivery worker's cursor. Times are INTEGER unix seconds (UTC); a
-- delivery line's next_at is NULL when no attempt follows.

-- webhooks keeps each signing secret as given: signing needs it.
-- events is the JSON list of the event patterns.
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL REFERENCES teams (id),
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX webhooks_by_team ON webhooks (team, created_at, id);

-- webhook_deliveries is the delivery log: attempt 0 is a delivery
-- scheduled, 1, 2, … its attempts; done marks the last line of one.
CREATE TABLE webhook_deliveries (
    id        TEXT PRIMARY KEY,
    webhook   TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id  TEXT NOT NULL,
    event_seq INTEGER NOT NULL,
    attempt   INTEGER NOT NULL,
    time      INTEGER NOT NULL,
    status    INTEGER NOT NULL,
    error     TEXT NOT NULL,
    next_at   INTEGER,
    done      INTEGER NOT NULL,
    UNIQUE (webhook, event_seq, attempt)
) WITHOUT ROWID;

-- webhook_cursor holds one row: the last event seq whose deliveries were
-- all scheduled.
CREATE TABLE webhook_cursor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
