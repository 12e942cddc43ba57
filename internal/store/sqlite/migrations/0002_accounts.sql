-- 0002_accounts adds who may do what: teams, users, API tokens, quotas,
-- budgets and the audit log. Times are INTEGER unix seconds (UTC); an
-- optional time (a token's expiry or revocation) is NULL when unset.

CREATE TABLE teams (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    team       TEXT NOT NULL REFERENCES teams (id),
    role       TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX users_by_team ON users (team, name);

-- tokens holds only the hash of each token's secret.
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    user       TEXT NOT NULL REFERENCES users (id),
    hash       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
) WITHOUT ROWID;
CREATE INDEX tokens_by_user ON tokens (user, created_at, id);

-- quotas: instance_type '' is the row for all types. Durations are seconds.
CREATE TABLE quotas (
    team                    TEXT NOT NULL,
    instance_type           TEXT NOT NULL,
    max_instances_per_block INTEGER NOT NULL,
    max_instances_held      INTEGER NOT NULL,
    max_duration_seconds    INTEGER NOT NULL,
    max_lead_seconds        INTEGER NOT NULL,
    PRIMARY KEY (team, instance_type)
) WITHOUT ROWID;

CREATE TABLE budgets (
    team         TEXT PRIMARY KEY,
    amount_minor INTEGER NOT NULL,
    currency     TEXT NOT NULL,
    period       TEXT NOT NULL
) WITHOUT ROWID;

-- audit records every mutating request; seq is the cursor that readers
-- follow and is never reused.
CREATE TABLE audit (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    time     INTEGER NOT NULL,
    user     TEXT NOT NULL,
    team     TEXT NOT NULL,
    token_id TEXT NOT NULL,
    method   TEXT NOT NULL,
    route    TEXT NOT NULL,
    subject  TEXT NOT NULL,
    status   INTEGER NOT NULL,
    outcome  TEXT NOT NULL
);
