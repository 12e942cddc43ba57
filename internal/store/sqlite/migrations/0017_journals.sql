-- 0017_journals keeps money as balanced journals of postings between
-- accounts: team wallets ('wallet:<team>'), blocks' escrows
-- ('escrow:<block>') and the operator's revenue ('revenue'). seq is the
-- journal order. Each entry of the former ledger becomes a journal of two
-- postings: the team's wallet, and the escrow of the block it was about
-- (the revenue when it was about no block: a spot run).
CREATE TABLE journals (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    time          INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    subject       TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    currency      TEXT NOT NULL
);
CREATE INDEX journals_by_subject ON journals (subject);

CREATE TABLE postings (
    journal         TEXT NOT NULL,
    n               INTEGER NOT NULL,
    account         TEXT NOT NULL,
    team            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    time            INTEGER NOT NULL,
    amount_minor    INTEGER NOT NULL,
    subject         TEXT NOT NULL,
    on_demand_minor INTEGER NOT NULL,
    PRIMARY KEY (journal, n)
) WITHOUT ROWID;
CREATE INDEX postings_by_account ON postings (account, time);
CREATE INDEX postings_by_team ON postings (team);

INSERT INTO journals (id, time, kind, subject, instance_type, currency)
    SELECT id, time, 'migrated', subject, instance_type, currency FROM ledger ORDER BY time, id;

INSERT INTO postings (journal, n, account, team, kind, time, amount_minor, subject, on_demand_minor)
    SELECT id, 0, 'wallet:' || team, team, kind, time,
        CASE WHEN kind = 'refund' THEN abs(amount_minor) ELSE -amount_minor END, '',
        CASE WHEN kind = 'refund' THEN abs(on_demand_minor) ELSE -on_demand_minor END
    FROM ledger;

INSERT INTO postings (journal, n, account, team, kind, time, amount_minor, subject, on_demand_minor)
    SELECT l.id, 1,
        CASE WHEN b.id IS NULL THEN 'revenue' ELSE 'escrow:' || b.id END,
        coalesce(b.team, l.team),
        CASE WHEN b.id IS NULL THEN 'revenue' ELSE 'escrow' END,
        l.time,
        CASE WHEN l.kind = 'refund' THEN -abs(l.amount_minor) ELSE l.amount_minor END, '',
        CASE WHEN l.kind = 'refund' THEN -abs(l.on_demand_minor) ELSE l.on_demand_minor END
    FROM ledger l LEFT JOIN blocks b ON b.id = l.subject;

DROP TABLE ledger;
