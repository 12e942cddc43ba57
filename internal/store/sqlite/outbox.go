package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

const actionColumns = `id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at`

// dueActionsSQL reads the due actions: pending, due at ?1, and the oldest
// pending one of their subject. It walks actions_due from its start up to
// ?1 and looks each row's subject up in actions_by_subject, so that it
// reads only the pending actions that are due, and stops at the limit ?2
// (-1: none).
const dueActionsSQL = `SELECT ` + actionColumns + ` FROM actions a
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
		&nextAt, &a.LastError, &created, &doneAt); err != nil {
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

// FinishAction records a pending action done.
func (s *Store) FinishAction(ctx context.Context, id string, at time.Time) (bool, error) {
	res, err := s.w.ExecContext(ctx, `UPDATE actions SET state = 'done', done_at = ?
		WHERE id = ? AND state = 'pending'`, unixMicros(at), id)
	if err != nil {
		return false, fmt.Errorf("finishing action %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("finishing action %s: %w", id, err)
	} else if n == 1 {
		return true, nil
	}
	if _, err := s.actionState(ctx, "finishing", id); err != nil {
		return false, err
	}
	return false, nil
}

// RetryAction records a failed try of a pending action.
func (s *Store) RetryAction(ctx context.Context, id string, attempts int, nextAt time.Time, lastErr string) error {
	return s.recordAction(ctx, "retrying", id, `UPDATE actions SET attempts = ?, next_at = ?, last_error = ?
		WHERE id = ? AND state = 'pending'`, attempts, unixMicros(nextAt), store.CleanLastError(lastErr), id)
}

// FailAction gives up on a pending action.
func (s *Store) FailAction(ctx context.Context, id string, at time.Time, lastErr string) error {
	return s.recordAction(ctx, "failing", id, `UPDATE actions SET state = 'failed', attempts = attempts + 1,
		last_error = ?, done_at = ? WHERE id = ? AND state = 'pending'`, store.CleanLastError(lastErr), unixMicros(at), id)
}

// recordAction runs an update of a pending action; when it changes no row
// it says why: the action is unknown, or no longer pending.
func (s *Store) recordAction(ctx context.Context, what, id, query string, args ...any) error {
	res, err := s.w.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s action %s: %w", what, id, err)
	} else if n == 1 {
		return nil
	}
	state, err := s.actionState(ctx, what, id)
	if err != nil {
		return err
	}
	return store.ActionNotPending(what, id, state)
}

// actionState reads an action's state, or ErrNotFound.
func (s *Store) actionState(ctx context.Context, what, id string) (core.ActionState, error) {
	var state string
	err := s.r.QueryRowContext(ctx, `SELECT state FROM actions WHERE id = ?`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%s action %s: %w", what, id, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("%s action %s: %w", what, id, err)
	}
	return core.ActionState(state), nil
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
		a.ID, string(a.Kind), a.Subject, a.Team, payload, unixMicros(a.NextAt), unixMicros(a.CreatedAt))
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
