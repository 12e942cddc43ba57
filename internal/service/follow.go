package service

import (
	"context"
	"errors"
	"time"

	"capblock/internal/clock"

	"capblock/internal/core"
	"capblock/internal/store"
)

// catchUpWait is how long a replica waits for its watch to deliver a
// barrier before it rebuilds its index from the store instead.
const catchUpWait = time.Second

// follow applies the blocks and the node health that any replica
// commits to this replica's index, so its searches stay current, wakes
// its event long polls, and forgets the accounts it cached when any
// replica changes them. A notice of a version the index already holds
// (this replica's own commits) is skipped without decoding its block.
func (s *Service) follow(ctx context.Context, co store.Coordinator) {
	s.following.Store(true)
	defer s.following.Store(false)
	for n := range co.WatchBlocks(ctx) {
		switch {
		case n.Accounts:
			s.accounts.forget()
			continue
		case n.Actions:
			s.kickOutbox() // another replica stored engine actions
			continue
		case n.Clock:
			s.followClock(ctx) // another replica moved the simulated clock
			continue
		case n.Health:
			// Before the blocks of its commit: a replica never places
			// on a failed node the blocks that left it.
			s.reloadHealth(ctx)
		case n.Lost:
			s.metrics.watchLost.Inc()
			s.accounts.forget()
			s.followClock(ctx)
			s.kickOutbox() // actions stored meanwhile may be due
			if err := s.reindex(ctx, reindexing{why: "lost watch", health: true}); err != nil && ctx.Err() == nil {
				s.log.Error("rebuilding the index after a lost watch", "err", err)
			}
			s.dropBarriers() // theirs may be lost too
		case n.Barrier != "":
			s.passBarrier(n.Barrier)
			continue
		default:
			for _, bv := range n.Blocks {
				s.applyNotice(ctx, bv)
			}
		}
		s.notifyEvents()
	}
}

// applyNotice brings one block of the index up to the version a commit
// left it at, from the notice when it carries the block, from the store
// otherwise.
func (s *Service) applyNotice(ctx context.Context, bv store.BlockVersion) {
	s.mu.RLock()
	known := s.knownVersion(bv.ID, bv.Version)
	s.mu.RUnlock()
	if known {
		return
	}
	var (
		b   core.Block
		err error
	)
	if bv.Block != nil {
		if b, err = bv.Block(); err != nil {
			s.log.Error("reading a block from a notice; loading it instead", "block", bv.ID, "err", err)
		}
	}
	if bv.Block == nil || err != nil {
		if b, err = s.store.GetBlock(ctx, bv.ID); err != nil {
			if ctx.Err() == nil {
				s.log.Error("loading a block another replica changed", "block", bv.ID, "err", err)
			}
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	took, err := s.indexCommitted(b)
	if err != nil {
		s.log.Error("indexing a block another replica changed", "block", bv.ID, "err", err)
	}
	if took && !b.State.Live() {
		s.kickOrders() // another replica freed capacity: standing orders may fit
	}
}

// catchUp brings the index up to date with every commit that has ended,
// after one of them made a commit of this replica conflict. On a shared
// store it sends a barrier and waits for the watch to deliver it: by then
// follow has applied every commit before it, at the cost of the blocks
// that changed. Otherwise, or when the barrier does not come back in
// time, it reloads the node health and rebuilds the index from the
// store (reindex). The caller must not hold s.mu.
func (s *Service) catchUp(ctx context.Context) error {
	if co, shared := s.store.(store.Coordinator); shared && s.following.Load() {
		token := newID("sync")
		passed := make(chan bool, 1)
		s.barrierMu.Lock()
		if s.barriers == nil {
			s.barriers = map[string]chan bool{}
		}
		s.barriers[token] = passed
		s.barrierMu.Unlock()
		defer func() {
			s.barrierMu.Lock()
			delete(s.barriers, token)
			s.barrierMu.Unlock()
		}()
		if err := co.Barrier(ctx, token); err != nil {
			s.log.Warn("sending a barrier; rebuilding the index instead", "err", err)
		} else {
			select {
			case ok := <-passed:
				if ok {
					s.metrics.catchUps.WithLabelValues("barrier").Inc()
					return nil
				}
			case <-time.After(catchUpWait):
				s.log.Warn("the watch did not deliver a barrier in time; rebuilding the index instead", "wait", catchUpWait)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	s.metrics.catchUps.WithLabelValues("rebuild").Inc()
	return s.reindex(ctx, reindexing{why: "catch-up", health: true})
}

// sharesStore reports whether other replicas may commit to this one's
// store. Until its watch is in place, the replica learns their commits
// only by rebuilding its index from the store (catchUp does).
func (s *Service) sharesStore() bool {
	_, shared := s.store.(store.Coordinator)
	return shared
}

// passBarrier tells the catch-up that sent token that follow reached it.
func (s *Service) passBarrier(token string) {
	s.barrierMu.Lock()
	defer s.barrierMu.Unlock()
	if ch, ok := s.barriers[token]; ok {
		ch <- true
		delete(s.barriers, token)
	}
}

// dropBarriers tells every waiting catch-up that its barrier may never
// come, so that it rebuilds the index instead.
func (s *Service) dropBarriers() {
	s.barrierMu.Lock()
	defer s.barrierMu.Unlock()
	for token, ch := range s.barriers {
		ch <- false
		delete(s.barriers, token)
	}
}

// followClock brings a simulated clock up to the time stored, which any
// replica may have moved (DESIGN.md, invariant 9: the clock is shared
// truth): on the Clock notice, after a lost watch, and at every tick of
// the leader. A clock that is not simulated, or already there, is left.
func (s *Service) followClock(ctx context.Context) {
	sim, ok := s.clock.(*clock.Sim)
	if !ok {
		return
	}
	stored, ok, err := s.store.SimClock(ctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("reading the simulated clock another replica moved", "err", err)
		}
		return
	case !ok || !stored.After(sim.Now()):
		return
	}
	if _, err := sim.Set(stored); err != nil && !errors.Is(err, clock.ErrBackwards) {
		s.log.Warn("moving the simulated clock to the time stored", "time", stored, "err", err)
		return
	}
	s.kickOrders() // deadlines may have passed
}
