-- 0009 stores what every replica and every restart must agree on beyond
-- blocks: the uid each team's jobs run under, the simulated clock, and
-- the quotes already bought. It mirrors the SQLite driver's 0009.

-- team_uids gives each team one uid, which no other team holds (TeamUID).
-- Replicas allocating at once race on the two unique keys, and the loser
-- looks again.
CREATE TABLE team_uids (
    team text COLLATE "C" PRIMARY KEY REFERENCES teams (id),
    uid  integer NOT NULL UNIQUE
);

-- sim_clock holds at most one row: the simulated clock's time in unix
-- nanoseconds, which only moves forward.
CREATE TABLE sim_clock (
    id         integer PRIMARY KEY CHECK (id = 1),
    unix_nanos bigint NOT NULL
);

-- used_offerings holds the SHA-256 of each offering id that a commit
-- consumed (a quote buys once), with the quote's expiry: a row may be
-- pruned once its quote has expired, never before.
CREATE TABLE used_offerings (
    hash       bytea PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX used_offerings_by_expiry ON used_offerings (expires_at);
