package service

import (
	"context"
	"fmt"
	"sort"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
)

// rebaseAfter is how old the index's hour 0 may get before the index is
// rebuilt from the store, so its arrays keep covering the horizon.
const rebaseAfter = 24 * time.Hour

// Run drives the lifecycle until ctx ends. On a store that several
// replicas share, it keeps the index current with the others' commits.
// It reconciles only while this replica holds the leader's lease (the
// store's, with an epoch that grows with each term: see lease.go), which
// a store of its own always grants at once. It returns once every
// goroutine it started has ended, so that the store may be closed after
// it.
func (s *Service) Run(ctx context.Context) error {
	if co, shared := s.store.(store.Coordinator); shared {
		followed := make(chan struct{})
		go func() {
			defer close(followed)
			s.follow(ctx, co)
		}()
		defer func() { <-followed }() // nothing of the service outlives Run
	}
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		s.runLockProbe(ctx)
	}()
	defer func() { <-probed }()
	for ctx.Err() == nil {
		if d := s.stuck(); d > 0 {
			// A stuck replica does not lead: another may.
			select {
			case <-ctx.Done():
			case <-time.After(leadRetry):
			}
			continue
		}
		leadCtx, cancel := context.WithCancel(ctx)
		lose := func() {
			// Not leading from now on, even while what led finishes
			// (a call that holds the index's lock, when stuck).
			s.leading.Store(false)
			cancel()
		}
		epoch, release, ok := s.holdLease(leadCtx, lose)
		if !ok {
			lose()
			continue // ctx ended
		}
		s.log.Info("this replica now runs the reconciler", "epoch", epoch)
		s.leading.Store(true)
		s.lead(leadCtx, epoch, lose)
		s.leading.Store(false)
		lose()
		release()
		if ctx.Err() == nil {
			s.log.Warn("this replica lost the leader's lease; another takes over", "epoch", epoch)
		}
	}
	return nil
}

// simTick is how often a leader on a simulated clock looks for due steps.
const simTick = 200 * time.Millisecond

// leadRetry is how often a follower tries to take the lead: another
// replica takes over within about this long after the leader dies.
const leadRetry = time.Second

// Leading reports whether this replica runs the reconciler now.
func (s *Service) Leading() bool { return s.leading.Load() }

// lead runs the workers that only the leader runs (webhook deliveries,
// the engine actions of the outbox under the lease's epoch, the jobs, the
// standing orders), then reconciles whenever a step is due, and at least
// once a minute, until ctx ends (the lease is lost, or the server stops);
// it returns once its workers have stopped. lose ends the lead, when the
// outbox finds the lease lost. It also forgets the
// used offerings whose quotes have long expired, at once and then about
// every hour.
//
// A crash or a change of leader between a commit and its engine step
// needs no repair here: the step is an action stored by the commit, which
// the new leader's outbox worker finds pending and applies.
func (s *Service) lead(ctx context.Context, epoch int64, lose func()) {
	stopWebhooks := s.startWebhooks(ctx) // only the leader delivers to webhooks
	defer stopWebhooks()
	stopOutbox := s.startOutbox(ctx, epoch, lose) // and applies the engine actions
	defer stopOutbox()
	stopWatch := s.startEngineWatch(ctx) // and reads the engine's nodes
	defer stopWatch()
	stopConverge := s.startConverge(ctx, epoch) // and repairs what drifts from the store's truth
	defer stopConverge()
	go s.loseWhenStuck(ctx, lose) // a stuck replica gives the lead up
	jobsDone := make(chan struct{})
	go func() {
		defer close(jobsDone)
		s.runJobs(ctx)
	}()
	defer func() { <-jobsDone }()
	var pruned, served time.Time
	kicked := true
	shared := s.sharesStore()
	for {
		if shared {
			s.followClock(ctx) // another replica may have moved it, its notice lost
		}
		if err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("reconciling block lifecycles", "err", err)
		}
		pruned = s.pruneUsedOfferings(ctx, pruned)
		served = s.serveOrdersWhenDue(ctx, kicked, served) // the standing orders, oldest first
		kicked = false
		wait := time.Minute
		if next, ok := s.nextDue(); ok {
			wait = min(wait, max(next.Sub(s.clock.Now()), time.Second))
		}
		if _, sim := s.clock.(*clock.Sim); sim {
			wait = simTick // the simulated clock moves by admin calls, not by itself
		}
		select {
		case <-ctx.Done():
			return
		case <-s.ordersKick:
			kicked = true
		case <-time.After(wait):
		}
	}
}

// pruneUsedOfferingsEvery is how often, on the service clock, the leader
// forgets the used offerings whose quotes expired; usedOfferingsKept is
// how long past its quote's expiry it keeps one, for the skew between
// replicas' clocks: a replica whose clock lags by less still finds the
// quote expired once its row is gone, so the quote never buys twice.
const (
	pruneUsedOfferingsEvery = time.Hour
	usedOfferingsKept       = time.Hour
)

// pruneUsedOfferings forgets the used offerings that expired more than
// usedOfferingsKept ago, unless it last did so (at last, on the service
// clock) less than pruneUsedOfferingsEvery ago. It returns when it last
// tried: a failure is logged and tried again an hour later, as the rows
// only cost space meanwhile.
func (s *Service) pruneUsedOfferings(ctx context.Context, last time.Time) time.Time {
	now := s.clock.Now()
	if !last.IsZero() && now.Sub(last) < pruneUsedOfferingsEvery {
		return last
	}
	before := now.Add(-usedOfferingsKept)
	n, err := s.store.PruneUsedOfferings(ctx, before)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("pruning the used offerings", "expired before", before, "err", err)
	case err == nil:
		s.log.Debug("pruned the used offerings", "removed", n, "expired before", before)
	}
	return now
}

// nextDue returns when the next lifecycle step of a block is due: the
// index keeps the blocks in that order, so this costs no walk of them.
func (s *Service) nextDue() (time.Time, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index.NextDue()
}

// idle reports, under the shared lock, whether a pass at now has nothing
// to do: no step due and the index's hour 0 recent enough. A tick with
// nothing due (every simTick on a simulated clock) so never takes the
// lock that decisions need.
func (s *Service) idle(now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	next, ok := s.index.NextDue()
	return (!ok || next.After(now)) && now.Sub(s.index.Origin) <= rebaseAfter
}

// rebase moves the index's hour 0 to now once it is older than
// rebaseAfter: it rebuilds the index from the store (reindex) without
// store I/O under the exclusive lock (about a second at 100,000 blocks),
// as the index cannot cover hours past its arrays.
func (s *Service) rebase(ctx context.Context) error {
	return s.reindex(ctx, reindexing{why: "rebase", due: func() bool {
		return s.clock.Now().Sub(s.index.Origin) > rebaseAfter
	}})
}

type transition struct {
	block   core.Block
	version int64 // the block's version once the step is stored
	core.Transition
}

// Reconcile takes every lifecycle step due now and commits them in one
// transaction with their events in time order and the engine actions
// they call for (a block's in the order of its steps), then wakes the
// outbox worker and the jobs. It reads only the blocks with a step due
// (Index.Due): its cost follows the steps, not the blocks stored.
func (s *Service) Reconcile(ctx context.Context) error {
	if s.idle(s.clock.Now()) {
		return nil
	}
	if err := s.rebase(ctx); err != nil {
		return err
	}
	var c store.Change
	var steps []transition
	err := s.withLock(func() error {
		now := s.clock.Now()
		// 1. Decide every due step. A block whose change is in flight (a
		//    purchase's move, another reconcile's step) is waited for: its
		//    commit takes milliseconds, and a caller that moved the clock
		//    expects every due step taken when this returns.
		s.awaitSettled(func() bool { return !s.dueInFlight(now) }, func() {})
		for _, b := range s.index.Due(now) {
			if s.index.Assumed(b.ID) {
				continue // decided, not yet committed: its step comes once it is
			}
			next, ts := core.Advance(*b, now, s.fleet.Limits)
			if len(ts) == 0 {
				continue
			}
			c.Update = append(c.Update, store.BlockUpdate{Block: next, ExpectedVersion: b.Version})
			for _, t := range ts {
				steps = append(steps, transition{block: next, version: b.Version + 1, Transition: t})
			}
		}
		sort.SliceStable(steps, func(i, j int) bool {
			if !steps[i].At.Equal(steps[j].At) {
				return steps[i].At.Before(steps[j].At)
			}
			return steps[i].block.ID < steps[j].block.ID
		})
		for _, st := range steps {
			c.Events = append(c.Events, s.event(st.At, st.Event, st.block, transitionData(st)))
			if kind, ok := core.BlockActionOf(st.Event); ok {
				c.Actions = append(c.Actions, s.blockAction(kind, st.block, st.version))
			}
			if st.Event == core.EventBlockPaymentFailed && st.block.Fee.Minor > 0 {
				// Never approved: the charge is reversed in full.
				c.Journals = append(c.Journals, refundJournal(core.JournalPaymentFailed, st.At, st.block, st.block.Fee, core.Money{}))
			}
		}
		if len(c.Update) == 0 {
			return nil
		}
		// 2. Assume the steps, then, without the lock, read the plans whose
		//    segments take a step (they record their own transitions, from
		//    the segments as stored before this change) and commit; then
		//    confirm the steps on the index or forget them.
		if err := s.assumeChange(c); err != nil {
			return fmt.Errorf("assuming %d lifecycle steps: %w", len(steps), err)
		}
		return nil
	})
	if err != nil || len(c.Update) == 0 {
		return err
	}
	if err := s.addPlanEvents(ctx, &c, steps); err != nil {
		s.settle(changeKey(c), c, err)
		return err
	}
	err = s.store.Commit(ctx, c)
	s.settle(changeKey(c), c, err)
	if store.IsConflict(err) {
		// Another writer changed a block: start from the stored state.
		if rerr := s.reindex(ctx, reindexing{why: "conflict"}); rerr != nil {
			s.log.Error("rebuilding the index after a conflict", "err", rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("committing %d lifecycle steps: %w", len(steps), err)
	}
	// 3. Wake what acts on the steps.
	if len(c.Actions) > 0 {
		s.kickOutbox()
	}
	s.kickJobs() // jobs follow their blocks
	return nil
}

// dueInFlight reports whether a block with a step due at now is in a
// decision not yet committed. Callers hold mu.
func (s *Service) dueInFlight(now time.Time) bool {
	if s.index.InFlight() == 0 {
		return false
	}
	for _, b := range s.index.Due(now) {
		if s.index.Assumed(b.ID) {
			return true
		}
	}
	return false
}

func transitionData(st transition) map[string]any {
	d := map[string]any{"endTime": st.block.End.Format(time.RFC3339)}
	switch st.Event {
	case core.EventBlockActive:
		d["from"], d["to"] = string(core.StateScheduled), string(core.StateActive)
	case core.EventBlockExpired:
		d["from"], d["to"] = string(core.StateActive), string(core.StateExpired)
	case core.EventBlockPaymentFailed:
		d["from"], d["to"] = string(core.StatePaymentPending), string(core.StatePaymentFailed)
		d["reason"] = "not approved in time; the charge is reversed"
	}
	return d
}
