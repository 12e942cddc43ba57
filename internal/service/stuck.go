package service

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// A stuck replica is not ready. A decision that never lets the index's
// lock go (a defect, a call that hangs under it) would leave every later
// request of this replica hanging while it still answered /readyz, and,
// leading, it would keep the lead and reconcile nothing. A probe takes
// the lock, shared, every lockProbeEvery while Run runs; when it has not
// got it for stuckAfter, Ready says so, and the replica gives up the
// lead (and does not take it) until it gets it again.

const (
	lockProbeEvery = 500 * time.Millisecond
	stuckAfter     = 5 * time.Second
)

// lockProbe is when the probe last got the lock (Unix nanoseconds; 0
// while no probe runs), and the bound past which the replica is stuck.
type lockProbe struct {
	last  atomic.Int64
	after time.Duration
}

// runLockProbe takes the lock, shared, every lockProbeEvery until ctx
// ends. A take that hangs hangs this goroutine only, and the time since
// the last take grows.
func (s *Service) runLockProbe(ctx context.Context) {
	s.probe.last.Store(time.Now().UnixNano())
	t := time.NewTicker(lockProbeEvery)
	defer t.Stop()
	defer s.probe.last.Store(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.RLock()
		s.mu.RUnlock()
		s.probe.last.Store(time.Now().UnixNano())
	}
}

// stuck reports for how long the probe has not got the lock, when that
// is past the bound; zero otherwise, and while no probe runs.
func (s *Service) stuck() time.Duration {
	last := s.probe.last.Load()
	if last == 0 {
		return 0
	}
	after := s.probe.after
	if after == 0 {
		after = stuckAfter
	}
	if d := time.Since(time.Unix(0, last)); d > after {
		return d
	}
	return 0
}

// errStuck says why a stuck replica is not ready.
func errStuck(d time.Duration) error {
	return fmt.Errorf("the service's index lock has not been free for %s: a decision is stuck; this replica serves no decision and does not lead until it is",
		d.Round(time.Second))
}

// loseWhenStuck ends the lead (lose) once the replica is stuck, checking
// every lockProbeEvery until ctx ends.
func (s *Service) loseWhenStuck(ctx context.Context, lose func()) {
	t := time.NewTicker(lockProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d := s.stuck(); d > 0 {
			s.log.Error("the index's lock is stuck; this replica gives up the lead", "stuckFor", d.Round(time.Second))
			lose()
			return
		}
	}
}
