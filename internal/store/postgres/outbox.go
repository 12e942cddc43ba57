package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// This file holds the state of 0010_actions_node_health: the outbox of
// engine actions and the nodes' health, both written by Commit. The
// worker's records of an action's outcome are single statements that
// change the row only while it is pending: of two workers finishing one
// action, the second waits for the first's row lock, then finds it done
// and changes nothing.

const actionColumns = `id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at`

// dueActionsSQL reads the due actions: pending, due at $1, and the oldest
// pending one of their subject. actions_due and actions_by_subject let it
// read only the pending actions that are due, and stop at the limit $2
// (NULL: none).
const dueActionsSQL = `SELECT ` + actionColumns + ` FROM actions a
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
		&a.NextAt, &a.LastError, &a.CreatedAt, &doneAt); err != nil {
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

// FinishAction records a pending action done.
func (s *Store) FinishAction(ctx context.Context, id string, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE actions SET state = 'done', done_at = $1
		WHERE id = $2 AND state = 'pending'`, at, id)
	if err != nil {
		return false, dbError("finishing action "+id, err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	if _, err := s.actionState(ctx, "finishing", id); err != nil {
		return false, err
	}
	return false, nil
}

// RetryAction records a failed try of a pending action.
func (s *Store) RetryAction(ctx context.Context, id string, attempts int, nextAt time.Time, lastErr string) error {
	return s.recordAction(ctx, "retrying", id, `UPDATE actions SET attempts = $1, next_at = $2, last_error = $3
		WHERE id = $4 AND state = 'pending'`, attempts, nextAt, store.CleanLastError(lastErr), id)
}

// FailAction gives up on a pending action.
func (s *Store) FailAction(ctx context.Context, id string, at time.Time, lastErr string) error {
	return s.recordAction(ctx, "failing", id, `UPDATE actions SET state = 'failed', attempts = attempts + 1,
		last_error = $1, done_at = $2 WHERE id = $3 AND state = 'pending'`, store.CleanLastError(lastErr), at, id)
}

// recordAction runs an update of a pending action; when it changes no row
// it says why: the action is unknown, or no longer pending.
func (s *Store) recordAction(ctx context.Context, what, id, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return dbError(what+" action "+id, err)
	}
	if tag.RowsAffected() == 1 {
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
	err := s.pool.QueryRow(ctx, `SELECT state FROM actions WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%s action %s: %w", what, id, store.ErrNotFound)
	}
	if err != nil {
		return "", dbError(what+" action "+id, err)
	}
	return core.ActionState(state), nil
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
			VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, '', $7, NULL)`,
			a.ID, string(a.Kind), a.Subject, a.Team, payload, a.NextAt, a.CreatedAt)
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
