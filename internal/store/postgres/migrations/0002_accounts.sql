-- 0002_accounts adds who may do what: teams, users, API tokens, quotas,
-- budgets and the audit log, as the sqlite driver's 0002_accounts does.
-- An optional time (a token's expiry or revocation) is NULL when unset.
-- The column that SQLite calls "user" is user_id here: USER is reserved
-- in PostgreSQL.

CREATE TABLE teams (
    id         text COLLATE "C" PRIMARY KEY,
    name       text COLLATE "C" NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

CREATE TABLE users (
    id         text COLLATE "C" PRIMARY KEY,
    name       text COLLATE "C" NOT NULL UNIQUE,
    team       text COLLATE "C" NOT NULL REFERENCES teams (id),
    role       text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX users_by_team ON users (team, name);

-- tokens holds only the hash of each token's secret.
CREATE TABLE tokens (
    id         text COLLATE "C" PRIMARY KEY,
    user_id    text COLLATE "C" NOT NULL REFERENCES users (id),
    hash       text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX tokens_by_user ON tokens (user_id, created_at, id);

-- quotas: instance_type '' is the row for all types. Durations are seconds.
CREATE TABLE quotas (
    team                    text NOT NULL,
    instance_type           text COLLATE "C" NOT NULL,
    max_instances_per_block integer NOT NULL,
    max_instances_held      integer NOT NULL,
    max_duration_seconds    bigint NOT NULL,
    max_lead_seconds        bigint NOT NULL,
    PRIMARY KEY (team, instance_type)
);

CREATE TABLE budgets (
    team         text PRIMARY KEY,
    amount_minor bigint NOT NULL,
    currency     text NOT NULL,
    period       text NOT NULL
);

-- audit records every mutating request; seq is the cursor that readers
-- follow and is never reused.
CREATE TABLE audit (
    seq      bigserial PRIMARY KEY,
    time     timestamptz NOT NULL,
    user_id  text NOT NULL,
    team     text NOT NULL,
    token_id text NOT NULL,
    method   text NOT NULL,
    route    text NOT NULL,
    subject  text NOT NULL,
    status   integer NOT NULL,
    outcome  text NOT NULL
);
