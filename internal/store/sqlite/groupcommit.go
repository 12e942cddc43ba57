package sqlite

import (
	"context"
	"fmt"
	"sync"

	"capblock/internal/store"
)

// Group commit. Each commit pays for a transaction and an fsync, which
// on a disk cost more than the change itself; commits that arrive while
// another is being written share the next transaction instead. There is
// no timer: a commit that finds the writer idle leads a group of itself
// at once, as fast as alone; commits that arrive meanwhile queue, and
// when the group is durable the first of them leads the next group, of
// every commit queued by then (up to maxGroup). A leader leads one group
// and returns with its answer: no caller waits on others' work longer
// than one group.
//
// Inside a group each change is applied in a savepoint, on the state
// the changes before it left, with every check it has alone (versions,
// overlaps, idempotency keys, budgets); one that fails is rolled back to
// its savepoint and fails alone. Nothing is answered before the group's
// COMMIT is durable; if that COMMIT fails, every change of the group
// fails with it.

// maxGroup is the most changes one transaction takes.
const maxGroup = 128

// commitRequest is one Commit waiting for its group.
type commitRequest struct {
	ctx  context.Context
	c    store.Change
	data []string // the events' data, encoded
	used []store.UsedOffering

	// Set by the group that took it, before wake.
	seqs, journalSeqs []int64
	err               error
	// wake receives once: when the request is answered, or when it is
	// to lead the next group (lead is then true).
	wake chan struct{}
	lead bool
}

// groupCommitter queues the commits of one writer connection.
type groupCommitter struct {
	mu    sync.Mutex
	queue []*commitRequest
	busy  bool // a leader is writing a group
	// largest is the most changes a group has taken so far.
	largest int
}

// commit answers req, leading a group when its turn comes.
func (g *groupCommitter) commit(s *Store, req *commitRequest) {
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if g.busy {
		g.mu.Unlock()
		<-req.wake
		if !req.lead {
			return // answered by another leader's group
		}
		g.mu.Lock()
	}
	g.busy = true
	n := min(len(g.queue), maxGroup)
	batch := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.largest = max(g.largest, n)
	g.mu.Unlock()

	s.commitGroup(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		next.lead = true
		next.wake <- struct{}{}
	} else {
		g.busy = false
	}
	g.mu.Unlock()
	for _, r := range batch {
		if r != req {
			r.wake <- struct{}{}
		}
	}
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
