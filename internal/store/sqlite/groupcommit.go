package sqlite

import (
	"context"
	"fmt"

	"capblock/internal/store"
)

// Group commit (see store.CommitGroup). Inside a group each change is
// applied in a savepoint, on the state the changes before it left, with
// every check it has alone (versions, overlaps, idempotency keys,
// budgets); one that fails is rolled back to its savepoint and fails
// alone. Nothing is answered before the group's COMMIT is durable; if
// that COMMIT fails, every change of the group fails with it.

// maxGroup is the most changes one transaction takes.
const maxGroup = 128

// commitRequest is one Commit waiting for its group.
type commitRequest struct {
	ctx  context.Context
	c    store.Change
	data []string // the events' data, encoded
	used []store.UsedOffering

	// Set by the group that took it.
	seqs, journalSeqs []int64
	err               error
}

// commitGroup applies batch in one transaction and sets each request's
// answer.
func (s *Store) commitGroup(batch []*commitRequest) {
	fail := func(rs []*commitRequest, err error) {
		for _, r := range rs {
			r.err = err
		}
	}
	// The transaction is the group's: one caller's cancellation ends only
	// its own change (apply checks its context between its steps).
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		fail(batch, fmt.Errorf("beginning commit: %w", err))
		return
	}
	defer tx.Rollback()
	grouped := len(batch) > 1
	var applied []*commitRequest
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = fmt.Errorf("committing change: %w", err)
			continue
		}
		if grouped {
			if _, err := tx.ExecContext(context.Background(), `SAVEPOINT change`); err != nil {
				fail(batch[i:], fmt.Errorf("beginning commit: %w", err))
				break
			}
		}
		w := &commitTx{ctx: context.WithoutCancel(r.ctx), done: r.ctx, tx: tx, ws: s.ws}
		seqs, err := w.apply(r.c, r.data, r.used)
		if err != nil {
			r.err = err
			if !grouped {
				break
			}
			if _, rerr := tx.ExecContext(context.Background(), `ROLLBACK TO change; RELEASE change`); rerr != nil {
				// The transaction cannot go on: nothing of it commits.
				fail(applied, fmt.Errorf("committing change: rolling back a change of its group: %w", rerr))
				fail(batch[i+1:], fmt.Errorf("committing change: %w", rerr))
				return
			}
			continue
		}
		if grouped {
			if _, err := tx.ExecContext(context.Background(), `RELEASE change`); err != nil {
				fail(append(applied, r), fmt.Errorf("committing change: %w", err))
				fail(batch[i+1:], fmt.Errorf("committing change: %w", err))
				return
			}
		}
		r.seqs, r.journalSeqs = seqs, w.journalSeqs
		applied = append(applied, r)
	}
	if len(applied) == 0 {
		return
	}
	if err := tx.Commit(); err != nil {
		fail(applied, fmt.Errorf("committing change: %w", err))
	}
}
