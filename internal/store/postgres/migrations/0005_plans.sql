-- 0005_plans adds training plans, as the SQLite driver's 0005_plans does.
-- A plan's segments are ordinary blocks that name it in plan_id ('' for a
-- block bought on its own); the plan's state is derived from theirs when
-- read, so it has no column.
ALTER TABLE blocks ADD COLUMN plan_id text COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX blocks_by_plan ON blocks (plan_id, start_time, id) WHERE plan_id <> '';

-- plans holds what a plan has beyond its segments: its name, team,
-- target, when it was bought and the fee of all its segments.
CREATE TABLE plans (
    id           text COLLATE "C" PRIMARY KEY,
    name         text NOT NULL,
    team         text COLLATE "C" NOT NULL,
    target       text NOT NULL,
    created_at   timestamptz NOT NULL,
    fee_minor    bigint NOT NULL,
    fee_currency text NOT NULL
);
CREATE INDEX plans_by_team ON plans (team, created_at, id);
