-- 0005_plans adds training plans. A plan's segments are ordinary blocks
-- that name it in plan_id ('' for a block bought on its own); the plan's
-- state is derived from theirs when read, so it has no column.
ALTER TABLE blocks ADD COLUMN plan_id TEXT NOT NULL DEFAULT '';
CREATE INDEX blocks_by_plan ON blocks (plan_id, start_time, id) WHERE plan_id <> '';

-- plans holds what a plan has beyond its segments: its name, team,
-- target, when it was bought and the fee of all its segments.
CREATE TABLE plans (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    team         TEXT NOT NULL,
    target       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    fee_minor    INTEGER NOT NULL,
    fee_currency TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX plans_by_team ON plans (team, created_at, id);
