package service

import (
	"context"
	"slices"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// Convergence. While this replica leads, it hands a backend that can
// compare the engine with the store's truth (backend.Converger) the
// desired state of the fleet, read from its index, whenever the index
// changed, at most every convergeTick; the backend repairs whatever the
// engine has that differs (backend/converge.go). When the lead ends the
// backend is told to stop repairing, before another replica's lead can
// begin (the lease's margin), so that two leaders never repair at once.

// convergeTick is how often the leader looks whether its index changed
// since it last handed the desired state to the backend.
const convergeTick = 250 * time.Millisecond

// startConverge hands the desired state to the backend until the
// returned stop is called, which tells the backend to stop repairing.
// A backend that cannot converge is left to its actions.
func (s *Service) startConverge(ctx context.Context, epoch int64) (stop func()) {
	cv, ok := s.backend.(backend.Converger)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var (
			lastIx      *core.Index
			lastChanges uint64
		)
		t := time.NewTicker(convergeTick)
		defer t.Stop()
		for {
			s.mu.RLock()
			ix, changes := s.index, s.index.Changes()
			var d *backend.Desired
			if ix != lastIx || changes != lastChanges {
				d = s.desiredLocked(epoch)
			}
			s.mu.RUnlock()
			if d != nil {
				cv.Converge(d)
				lastIx, lastChanges = ix, changes
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		cv.Converge(nil)
	}
}

// desiredLocked is the desired state that the index holds now. s.mu must
// be held, shared at least.
func (s *Service) desiredLocked(epoch int64) *backend.Desired {
	d := &backend.Desired{Epoch: epoch, At: s.clock.Now()}
	for _, b := range s.index.Blocks() {
		if s.index.Assumed(b.ID) {
			d.Unsettled = append(d.Unsettled, b.ID)
			continue
		}
		c := *b
		c.Placements = slices.Clone(b.Placements)
		d.Blocks = append(d.Blocks, c)
	}
	return d
}
