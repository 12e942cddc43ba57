package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/backend"
)

// LeadOnce does once, synchronously and in a fixed order, the work that
// Run's leader repeats on goroutines of its own: it takes the leader's
// lease (or renews it: a store of its own grants it at once, and a
// restart takes it back), reconciles the lifecycles, forgets the used
// offerings whose quotes long expired, serves the standing orders,
// reads the engine's nodes and records the health they changed (one
// check of the engine watch, which logs its own failures, as the
// leader's does), moves the jobs on (one pass of the job runner:
// JobsOnce), applies the engine actions due on the outbox clock
// (one pass of the worker, OutboxOptions.Parallel at a time), and hands
// the backend, when it converges, the desired state that the index
// holds now.
//
// It is for a deterministic simulation of the whole service
// (internal/simulate), which drives the leader step by step instead of
// running Run: nothing of it runs after it returns. It returns the
// errors of every part joined; a part's failure does not skip the next.
func (s *Service) LeadOnce(ctx context.Context) error {
	l, ok, err := s.store.AcquireLease(ctx, s.leaseHolder(), leaseTTL)
	if err != nil {
		return fmt.Errorf("taking the leader's lease: %w", err)
	}
	if !ok {
		return fmt.Errorf("taking the leader's lease: %s holds it until %s", l.Holder, l.Expires)
	}
	errs := []error{s.Reconcile(ctx)}
	s.pruneUsedOfferings(ctx, time.Time{})  // logs its own failure, as the leader does
	errs = append(errs, s.ServeOrders(ctx)) // logs each order's failure, as the leader does
	if s.backend != nil {                   // as startEngineWatch
		(&engineWatch{svc: s, announced: map[string]bool{}}).check(ctx)
	}
	s.JobsOnce(ctx) // before the outbox's pass, which starts and stops the instances it decides
	// The outbox's pass last but the hand-over to the engine: the work
	// of a leader deposed while an engine call hangs is then only what
	// the lease's epoch and the engine's versions fence.
	if s.backend != nil || s.jobs != nil { // as startOutbox
		w := &outboxWorker{svc: s, opts: s.outbox.opts, epoch: l.Epoch}
		errs = append(errs, w.pass(ctx))
	}
	if cv, ok := s.backend.(backend.Converger); ok {
		s.mu.RLock()
		d := s.desiredLocked(l.Epoch)
		s.mu.RUnlock()
		cv.Converge(d)
	}
	return errors.Join(errs...)
}
