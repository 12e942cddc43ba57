-- 0009 stores what every replica and every restart must agree on beyond
-- blocks: the uid each team's jobs run under, the simulated clock, and
-- the quotes already bought.

-- team_uids gives each team one uid, which no other team holds (TeamUID).
CREATE TABLE team_uids (
    team TEXT PRIMARY KEY REFERENCES teams (id),
    uid  INTEGER NOT NULL UNIQUE
) WITHOUT ROWID;

-- sim_clock holds at most one row: the simulated clock's time in unix
-- nanoseconds, which only moves forward.
CREATE TABLE sim_clock (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    unix_nanos INTEGER NOT NULL
);

-- used_offerings holds the SHA-256 of each offering id that a commit
-- consumed (a quote buys once), with the quote's expiry in unix seconds:
-- a row may be pruned once its quote has expired, never before.
CREATE TABLE used_offerings (
    hash       BLOB PRIMARY KEY,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX used_offerings_by_expiry ON used_offerings (expires_at);
