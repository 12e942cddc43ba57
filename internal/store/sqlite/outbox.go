package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// This file holds the state of 0010_actions_node_health: the outbox of
// engine actions and the nodes' health, both written by Commit; the
// worker's records of an action's outcome run on the single writer.

// Actions and node health keep their times in unix microseconds.
func unixMicros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

const actionColumns = `id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at, trace`

// dueActionsSQL reads the due actions: pending, due at ?1, and the oldest
// pending one of their subject. It walks actions_due from its start up to
// ?1 and looks each row's subject up in actions_by_subject, so that it
// reads only the pending actions that are due, and stops at the limit ?2
// (-1: none).
const dueActionsSQL = `SELECT ` + actionColumns + dueActionsFrom

// dueActionsFrom is the due actions' rows, in their order, as
// dueActionsSQL and claimActionsSQL read them.
const dueActionsFrom = ` FROM actions a
	WHERE a.state = 'pending' AND a.next_at <= ?1
	  AND NOT EXISTS (SELECT 1 FROM actions o
	                  WHERE o.subject = a.subject AND o.seq < a.seq AND o.state = 'pending')
	ORDER BY a.next_at, a.created_at, a.id
	LIMIT ?2`

func scanAction(r rowScanner) (core.Action, error) {
	var (
		a               core.Action
		kind, state     string
		nextAt, created int64
		doneAt          sql.NullInt64
	)
	if err := r.Scan(&a.ID, &kind, &a.Subject, &a.Team, &a.Payload, &state, &a.Attempts,
		&nextAt, &a.LastError, &created, &doneAt, &a.Trace); err != nil {
		return core.Action{}, err
	}
	a.Kind, a.State = core.ActionKind(kind), core.ActionState(state)
	a.NextAt, a.CreatedAt = fromMicros(nextAt), fromMicros(created)
	if doneAt.Valid {
		a.DoneAt = fromMicros(doneAt.Int64)
	}
	return a, nil
}

// DueActions returns the actions due at now, one per subject.
func (s *Store) DueActions(ctx context.Context, now time.Time, limit int) ([]core.Action, error) {
	if limit <= 0 {
		limit = -1
	}
	as, err := queryRows(ctx, s.r, scanAction, dueActionsSQL, unixMicros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("reading due actions: %w", err)
	}
	return as, nil
}

// claimActionsSQL claims for epoch ?3 the actions that dueActionsSQL
// returns at ?1, up to ?2, and returns them (in no order).
const claimActionsSQL = `UPDATE actions SET claim_epoch = ?3
	WHERE seq IN (SELECT a.seq` + dueActionsFrom + `)
	RETURNING ` + actionColumns

// ClaimActions claims the actions due at now for epoch, while its lease
// is current. The check and the claim share one write transaction.
func (s *Store) ClaimActions(ctx context.Context, epoch int64, now time.Time, limit int) ([]core.Action, error) {
	if limit <= 0 {
		limit = -1
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("claiming due actions: beginning: %w", err)
	}
	defer tx.Rollback()
	if current, err := leaseCurrent(ctx, tx, epoch); err != nil {
		return nil, fmt.Errorf("claiming due actions: %w", err)
	} else if !current {
		return nil, store.LeaseLost("claiming due actions", epoch)
	}
	as, err := queryRows(ctx, tx, scanAction, claimActionsSQL, unixMicros(now), limit, epoch)
	if err != nil {
		return nil, fmt.Errorf("claiming due actions: %w", err)
	}
	if err := commit(ctx, tx); err != nil {
		return nil, fmt.Errorf("claiming due actions: committing: %w", err)
	}
	slices.SortFunc(as, func(a, b core.Action) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return as, nil
}

// fence is the condition of a record of an action under an epoch: the
// epoch claimed the action, and its lease is current. Its parameters are
// numbered n (the epoch) and n+1 (now), which recordAction appends.
func fence(n int) string {
	return fmt.Sprintf(` AND claim_epoch = ?%[1]d AND EXISTS (SELECT 1 FROM leases
	WHERE name = '`+store.LeaderLease+`' AND epoch = ?%[1]d AND expires > ?%[2]d)`, n, n+1)
}

// FinishAction records a pending action claimed by epoch done.
func (s *Store) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	err := s.recordAction(ctx, "finishing", epoch, id, `UPDATE actions SET state = 'done', done_at = ?1
		WHERE id = ?2 AND state = 'pending'`+fence(3), unixMicros(at), id)
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
	return s.recordAction(ctx, "retrying", epoch, id, `UPDATE actions SET attempts = ?1, next_at = ?2, last_error = ?3
		WHERE id = ?4 AND state = 'pending'`+fence(5), attempts, unixMicros(nextAt), store.CleanLastError(lastErr), id)
}

// FailAction gives up on a pending action claimed by epoch.
func (s *Store) FailAction(ctx context.Context, epoch int64, id string, at time.Time, lastErr string) error {
	return s.recordAction(ctx, "failing", epoch, id, `UPDATE actions SET state = 'failed', attempts = attempts + 1,
		last_error = ?1, done_at = ?2 WHERE id = ?3 AND state = 'pending'`+fence(4), store.CleanLastError(lastErr), unixMicros(at), id)
}

// recordAction runs an update of a pending action under epoch, whose
// query ends with fence(len(args)+1), in one statement on the single
// writer. When it changes no row it says why: the lease of epoch is not
// current (which it then was not at the update either: a lease not
// current never is again), the action is unknown, no longer pending, or
// not claimed by epoch.
func (s *Store) recordAction(ctx context.Context, what string, epoch int64, id, query string, args ...any) error {
	args = append(args, epoch, storeNow())
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	} else if n == 1 {
		return nil
	}
	if current, err := leaseCurrent(ctx, s.r, epoch); err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	} else if !current {
		return store.LeaseLost(what+" action "+id, epoch)
	}
	var (
		state   string
		claimed int64
	)
	err = s.r.QueryRowContext(ctx, `SELECT state, claim_epoch FROM actions WHERE id = ?`, id).Scan(&state, &claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s action %s: %w", what, id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	}
	if core.ActionState(state) != core.ActionPending {
		return store.ActionNotPending(what, id, core.ActionState(state))
	}
	return store.ActionNotClaimed(what, id, epoch, claimed)
}

// ActionsFor returns a subject's actions in the order they were stored.
func (s *Store) ActionsFor(ctx context.Context, subject string) ([]core.Action, error) {
	as, err := queryRows(ctx, s.r, scanAction, `SELECT `+actionColumns+` FROM actions
		WHERE subject = ? ORDER BY seq`, subject)
	if err != nil {
		return nil, fmt.Errorf("reading the actions of %s: %w", subject, err)
	}
	return as, nil
}

// ActionCounts counts the pending and the failed actions.
func (s *Store) ActionCounts(ctx context.Context) (pending, failed int64, err error) {
	if err := s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM actions WHERE state = 'pending'),
		(SELECT count(*) FROM actions WHERE state = 'failed')`).Scan(&pending, &failed); err != nil {
		return 0, 0, fmt.Errorf("counting actions: %w", err)
	}
	return pending, failed, nil
}

// PruneActions removes the done actions that finished before doneBefore.
func (s *Store) PruneActions(ctx context.Context, doneBefore time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM actions WHERE state = 'done' AND done_at < ?`, unixMicros(doneBefore))
	if err != nil {
		return 0, fmt.Errorf("pruning actions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("pruning actions: %w", err)
	}
	return n, nil
}

// NodeHealth returns every stored health record, by node.
func (s *Store) NodeHealth(ctx context.Context) ([]core.NodeHealth, error) {
	hs, err := queryRows(ctx, s.r, func(r rowScanner) (core.NodeHealth, error) {
		var (
			h              core.NodeHealth
			health, source string
			since          int64
		)
		if err := r.Scan(&h.Node, &health, &h.Reason, &since, &source); err != nil {
			return core.NodeHealth{}, err
		}
		h.Health, h.Source, h.Since = core.Health(health), core.HealthSource(source), fromMicros(since)
		return h, nil
	}, `SELECT node, health, reason, since, source FROM node_health ORDER BY node`)
	if err != nil {
		return nil, fmt.Errorf("reading node health: %w", err)
	}
	return hs, nil
}

// insertAction stores a new pending action inside a commit.
func (w *commitTx) insertAction(a core.Action) error {
	payload := a.Payload
	if payload == nil {
		payload = []byte{} // the column is NOT NULL
	}
	_, err := w.stmt(w.ws.insertAction).ExecContext(w.ctx,
		a.ID, string(a.Kind), a.Subject, a.Team, payload, unixMicros(a.NextAt), unixMicros(a.CreatedAt), a.Trace)
	if isConstraint(err) {
		return fmt.Errorf("inserting action %s: it already exists: %w", a.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("inserting action %s: %w", a.ID, err)
	}
	return nil
}

// putNodeHealth replaces a node's health record inside a commit.
func (w *commitTx) putNodeHealth(h core.NodeHealth) error {
	if _, err := w.tx.ExecContext(w.ctx, `INSERT INTO node_health (node, health, reason, since, source)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET health = excluded.health, reason = excluded.reason,
			since = excluded.since, source = excluded.source`,
		h.Node, string(h.Health), h.Reason, unixMicros(h.Since), string(h.Source)); err != nil {
		return fmt.Errorf("storing the health of node %s: %w", h.Node, err)
	}
	return nil
}

// commit commits tx, begun with ctx. A transaction that the end of ctx
// rolled back is ctx's error, not database/sql's ErrTxDone: the caller
// was stopped, nothing failed.
func commit(ctx context.Context, tx *sql.Tx) error {
	err := tx.Commit()
	if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
