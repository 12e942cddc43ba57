-- 0018_leases fences the leader. leases holds one row, 'leader': the
-- holder of the current term, its epoch, and when it ends (unix
-- microseconds on the process's wall clock); epoch 0, ended at 0, is no
-- term yet. Each new term takes the next epoch, and the outbox's records
-- carry the epoch of the worker that makes them: an action is claimed by
-- an epoch (claim_epoch, 0 for none) and recorded only under it, while
-- its lease is current.
CREATE TABLE leases (
    name    TEXT PRIMARY KEY,
    holder  TEXT NOT NULL,
    epoch   INTEGER NOT NULL,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO leases (name, holder, epoch, expires) VALUES ('leader', '', 0, 0);

ALTER TABLE actions ADD COLUMN claim_epoch INTEGER NOT NULL DEFAULT 0;
