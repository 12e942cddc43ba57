package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// This file holds the state of 0010_actions_node_health: the outbox of
// engine actions and the nodes' health, both written by Commit. The
// worker's records of an action's outcome are single statements that
// change the row only while it is pending, claimed by the record's epoch
// (0018_leases), and that epoch's lease current: of two records of one
// action, the second waits for the first's row lock, then finds the row
// as the first left it.

const actionColumns = `id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at, trace`

// dueActionsSQL reads the due actions: pending, due at $1, and the oldest
// pending one of their subject. actions_due and actions_by_subject let it
// read only the pending actions that are due, and stop at the limit $2
// (NULL: none).
const dueActionsSQL = `SELECT ` + actionColumns + dueActionsFrom

// dueActionsFrom is the due actions' rows, in their order, as
// dueActionsSQL and claimActionsSQL read them.
const dueActionsFrom = ` FROM actions a
	WHERE a.state = 'pending' AND a.next_at <= $1
	  AND NOT EXISTS (SELECT 1 FROM actions o
	                  WHERE o.subject = a.subject AND o.seq < a.seq AND o.state = 'pending')
	ORDER BY a.next_at, a.created_at, a.id
	LIMIT $2`

func scanAction(r rowScanner) (core.Action, error) {
	var (
		a           core.Action
		kind, state string
		doneAt      *time.Time
	)
	if err := r.Scan(&a.ID, &kind, &a.Subject, &a.Team, &a.Payload, &state, &a.Attempts,
		&a.NextAt, &a.LastError, &a.CreatedAt, &doneAt, &a.Trace); err != nil {
		return core.Action{}, err
	}
	a.Kind, a.State = core.ActionKind(kind), core.ActionState(state)
	a.NextAt, a.CreatedAt = a.NextAt.UTC(), a.CreatedAt.UTC()
	if doneAt != nil {
		a.DoneAt = doneAt.UTC()
	}
	return a, nil
}

// DueActions returns the actions due at now, one per subject.
func (s *Store) DueActions(ctx context.Context, now time.Time, limit int) ([]core.Action, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	as, err := queryRows(ctx, s.pool, scanAction, dueActionsSQL, now, lim)
	if err != nil {
		return nil, dbError("reading due actions", err)
	}
	return as, nil
}

// claimActionsSQL claims for epoch $3 the actions that dueActionsSQL
// returns at $1, up to $2, and returns them (in no order). It locks the
// due rows it claims and skips those that another transaction holds: a
// record being written, or another claim.
const claimActionsSQL = `WITH due AS (SELECT a.seq` + dueActionsFrom + `
		FOR UPDATE OF a SKIP LOCKED)
	UPDATE actions SET claim_epoch = $3 FROM due WHERE actions.seq = due.seq
	RETURNING ` + claimedColumns

// claimedColumns are actionColumns of the actions table in an UPDATE
// that joins another.
const claimedColumns = `actions.id, actions.kind, actions.subject, actions.team, actions.payload, actions.state,
	actions.attempts, actions.next_at, actions.last_error, actions.created_at, actions.done_at, actions.trace`

// leaseHeldSQL finds the lease of epoch $1 if it is current, and holds
// it (FOR SHARE) until the transaction ends: a new term, or a release,
// waits for the transaction, and the transaction waits for one under
// way, then checks the lease as it left it.
const leaseHeldSQL = `SELECT 1 FROM leases
	WHERE name = '` + store.LeaderLease + `' AND epoch = $1 AND expires > clock_timestamp()
	FOR SHARE`

// ClaimActions claims the actions due at now for epoch, while its lease
// is current: one transaction checks and holds the lease, then claims.
func (s *Store) ClaimActions(ctx context.Context, epoch int64, now time.Time, limit int) ([]core.Action, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	var as []core.Action
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, leaseHeldSQL, epoch).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.LeaseLost("claiming due actions", epoch)
		}
		if err != nil {
			return dbError("claiming due actions: reading the leader's lease", err)
		}
		as, err = queryRows(ctx, tx, scanAction, claimActionsSQL, now, lim, epoch)
		if err != nil {
			return dbError("claiming due actions", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(as, func(a, b core.Action) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return as, nil
}

// fence is the condition of a record of an action under an epoch: the
// epoch claimed the action, and its lease is current, held (FOR SHARE)
// until the statement's transaction ends, as leaseHeldSQL holds it. Its
// parameter is numbered n (the epoch), which recordAction appends.
func fence(n int) string {
	return fmt.Sprintf(` AND claim_epoch = $%[1]d AND EXISTS (SELECT 1 FROM leases
	WHERE name = '`+store.LeaderLease+`' AND epoch = $%[1]d AND expires > clock_timestamp() FOR SHARE)`, n)
}

// FinishAction records a pending action claimed by epoch done.
func (s *Store) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	err := s.recordAction(ctx, "finishing", epoch, id, `UPDATE actions SET state = 'done', done_at = $1
		WHERE id = $2 AND state = 'pending'`+fence(3), at, id)
	switch {
	case err == nil:
		return true, nil
	case store.IsConflict(err): // no longer pending, or not this epoch's
		return false, nil
	}
	return false, err
}

// RetryAction records a failed try of a pending action claimed by epoch.
func (s *Store) RetryAction(ctx context.Context, epoch int64, id string, attempts int, nextAt time.Time, lastErr string) error {
	return s.recordAction(ctx, "retrying", epoch, id, `UPDATE actions SET attempts = $1, next_at = $2, last_error = $3
		WHERE id = $4 AND state = 'pending'`+fence(5), attempts, nextAt, store.CleanLastError(lastErr), id)
}

// FailAction gives up on a pending action claimed by epoch.
func (s *Store) FailAction(ctx context.Context, epoch int64, id string, at time.Time, lastErr string) error {
	return s.recordAction(ctx, "failing", epoch, id, `UPDATE actions SET state = 'failed', attempts = attempts + 1,
		last_error = $1, done_at = $2 WHERE id = $3 AND state = 'pending'`+fence(4), store.CleanLastError(lastErr), at, id)
}

// recordAction runs an update of a pending action under epoch, whose
// query ends with fence(len(args)+1), in one statement. When it changes
// no row it says why: the lease of epoch is not current (which it then
// was not at the update either: a lease not current never is again),
// the action is unknown, no longer pending, or not claimed by epoch.
func (s *Store) recordAction(ctx context.Context, what string, epoch int64, id, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, append(args, epoch)...)
	if err != nil {
		return dbError(what+" action "+id, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if current, err := s.leaseCurrent(ctx, epoch); err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	} else if !current {
		return store.LeaseLost(what+" action "+id, epoch)
	}
	var (
		state   string
		claimed int64
	)
	err = s.pool.QueryRow(ctx, `SELECT state, claim_epoch FROM actions WHERE id = $1`, id).Scan(&state, &claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s action %s: %w", what, id, store.ErrNotFound)
	}
	if err != nil {
		return dbError(what+" action "+id, err)
	}
	if core.ActionState(state) != core.ActionPending {
		return store.ActionNotPending(what, id, core.ActionState(state))
	}
	return store.ActionNotClaimed(what, id, epoch, claimed)
}

// ActionsFor returns a subject's actions in the order they were stored.
func (s *Store) ActionsFor(ctx context.Context, subject string) ([]core.Action, error) {
	as, err := queryRows(ctx, s.pool, scanAction, `SELECT `+actionColumns+` FROM actions
		WHERE subject = $1 ORDER BY seq`, subject)
	if err != nil {
		return nil, dbError("reading the actions of "+subject, err)
	}
	return as, nil
}

// ActionCounts counts the pending and the failed actions.
func (s *Store) ActionCounts(ctx context.Context) (pending, failed int64, err error) {
	if err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM actions WHERE state = 'pending'),
		(SELECT count(*) FROM actions WHERE state = 'failed')`).Scan(&pending, &failed); err != nil {
		return 0, 0, dbError("counting actions", err)
	}
	return pending, failed, nil
}

// PruneActions removes the done actions that finished before doneBefore.
func (s *Store) PruneActions(ctx context.Context, doneBefore time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM actions WHERE state = 'done' AND done_at < $1`, doneBefore)
	if err != nil {
		return 0, dbError("pruning actions", err)
	}
	return tag.RowsAffected(), nil
}

// NodeHealth returns every stored health record, by node.
func (s *Store) NodeHealth(ctx context.Context) ([]core.NodeHealth, error) {
	hs, err := queryRows(ctx, s.pool, func(r rowScanner) (core.NodeHealth, error) {
		var (
			h              core.NodeHealth
			health, source string
		)
		if err := r.Scan(&h.Node, &health, &h.Reason, &h.Since, &source); err != nil {
			return core.NodeHealth{}, err
		}
		h.Health, h.Source, h.Since = core.Health(health), core.HealthSource(source), h.Since.UTC()
		return h, nil
	}, `SELECT node, health, reason, since, source FROM node_health ORDER BY node`)
	if err != nil {
		return nil, dbError("reading node health", err)
	}
	return hs, nil
}

// queueActions queues the insertion of a change's actions, pending, in
// their order: each takes the next seq.
func (w *commitWriter) queueActions(as []core.Action) {
	for _, a := range as {
		payload := a.Payload
		if payload == nil {
			payload = []byte{} // the column is NOT NULL
		}
		w.exec("inserting action "+a.ID, nil, `INSERT INTO actions (`+actionColumns+`)
			VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, '', $7, NULL, $8)`,
			a.ID, string(a.Kind), a.Subject, a.Team, payload, a.NextAt, a.CreatedAt, a.Trace)
	}
}

// queueNodeHealth queues the replacement of the nodes' health records.
func (w *commitWriter) queueNodeHealth(hs []core.NodeHealth) {
	for _, h := range hs {
		w.exec("storing the health of node "+h.Node, nil, `INSERT INTO node_health (node, health, reason, since, source)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (node) DO UPDATE SET health = excluded.health, reason = excluded.reason,
				since = excluded.since, source = excluded.source`,
			h.Node, string(h.Health), h.Reason, h.Since, string(h.Source))
	}
}
