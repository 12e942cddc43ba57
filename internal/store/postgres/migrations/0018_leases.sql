-- 0018_leases fences the leader. leases holds one row, 'leader': the
-- holder of the current term, its epoch, and when it ends on the
-- database's clock, so that replicas whose clocks disagree agree on
-- expiry; epoch 0, ended in 1970, is no term yet. Each new term takes the
-- next epoch, and the outbox's records carry the epoch of the worker that
-- makes them: an action is claimed by an epoch (claim_epoch, 0 for none)
-- and recorded only under it, while its lease is current. It mirrors the
-- SQLite driver's 0018.
CREATE TABLE leases (
    name    text COLLATE "C" PRIMARY KEY,
    holder  text NOT NULL,
    epoch   bigint NOT NULL,
    expires timestamptz NOT NULL
);
INSERT INTO leases (name, holder, epoch, expires) VALUES ('leader', '', 0, to_timestamp(0));

-- A constant default: no table rewrite.
ALTER TABLE actions ADD COLUMN claim_epoch bigint NOT NULL DEFAULT 0;
