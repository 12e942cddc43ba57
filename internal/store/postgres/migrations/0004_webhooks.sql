-- 0004_webhooks adds the teams' webhooks, their delivery log and the
-- delivery worker's cursor, as the sqlite driver's 0004_webhooks does. A
-- delivery line's next_at is NULL when no attempt follows.

-- webhooks keeps each signing secret as given: signing needs it.
-- events is the JSON list of the event patterns.
CREATE TABLE webhooks (
    id         text COLLATE "C" PRIMARY KEY,
    team       text COLLATE "C" NOT NULL REFERENCES teams (id),
    url        text NOT NULL,
    events     jsonb NOT NULL,
    secret     text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX webhooks_by_team ON webhooks (team, created_at, id);

-- webhook_deliveries is the delivery log: attempt 0 is a delivery
-- scheduled, 1, 2, … its attempts; done marks the last line of one.
CREATE TABLE webhook_deliveries (
    id        text COLLATE "C" PRIMARY KEY,
    webhook   text COLLATE "C" NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id  text NOT NULL,
    event_seq bigint NOT NULL,
    attempt   integer NOT NULL,
    time      timestamptz NOT NULL,
    status    integer NOT NULL,
    error     text NOT NULL,
    next_at   timestamptz,
    done      boolean NOT NULL,
    UNIQUE (webhook, event_seq, attempt)
);

-- webhook_cursor holds one row: the last event seq whose deliveries were
-- all scheduled.
CREATE TABLE webhook_cursor (
    id  integer PRIMARY KEY CHECK (id = 1),
    seq bigint NOT NULL
);
