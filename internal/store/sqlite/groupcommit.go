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

// commitGroup applies batch in one transaction and sets each request's
// answer.
func (s *Store) commitGroup(batch []*store.CommitRequest) {
	for _, r := range batch {
		r.Group = len(batch)
	}
	fail := func(rs []*store.CommitRequest, err error) {
		for _, r := range rs {
			r.Err = err
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
	var applied []*store.CommitRequest
	for i, r := range batch {
		if err := r.Ctx.Err(); err != nil {
			r.Err = fmt.Errorf("committing change: %w", err)
			continue
		}
		if grouped {
			if _, err := tx.ExecContext(context.Background(), `SAVEPOINT change`); err != nil {
				fail(batch[i:], fmt.Errorf("beginning commit: %w", err))
				break
			}
		}
		w := &commitTx{ctx: context.WithoutCancel(r.Ctx), done: r.Ctx, tx: tx, ws: s.ws}
		seqs, err := w.apply(r.Change, r.EventData, r.Used)
		if err != nil {
			r.Err = err
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
		r.Seqs, r.JournalSeqs = seqs, w.journalSeqs
		applied = append(applied, r)
	}
	if len(applied) == 0 {
		return
	}
	if err := tx.Commit(); err != nil {
		fail(applied, fmt.Errorf("committing change: %w", err))
	}
}
