package service

import (
	"errors"
	"time"

	"capblock/internal/core"
)

// settleWait bounds how long a decision waits for the decisions in flight
// to settle: their commits take milliseconds (more on a loaded machine),
// so past it the capacity is taken for good, or by a steady stream of
// other purchases of the same capacity.
const settleWait = 10 * time.Second

// want is the capacity a request asks for: GPUs of a model, in a zone
// (any when "").
type want struct {
	gpuModel, zone string
}

// decideLocked runs decide, which places a request for w on the index,
// with mu held. A request refused for want of capacity or quota while a
// decision in flight changes blocks of that GPU model in that zone waits
// for the decisions to settle and is decided again: what they hold is
// free again if their commits fail, and a block in flight is not moved
// to make room, whatever its hours (a whole-node placement may re-pack
// every tentative block of the pool). So a purchase answers no_capacity
// only for capacity that is committed, or held in flight for longer than
// settleWait; decisions on other GPU models or zones never hold it up.
// Searches never wait: they read assumed capacity as taken.
func (s *Service) decideLocked(w want, decide func() error) error {
	err := decide()
	s.awaitSettled(func() bool {
		return !refusedForCapacity(err) || !s.index.InFlightOn(w.gpuModel, w.zone, time.Time{}, endOfTime)
	}, func() { err = decide() })
	return err
}

// endOfTime is later than any block ends.
var endOfTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// awaitSettled waits, with mu held, while done reports false: each time
// a decision in flight settles it calls again (a fresh decision), then
// asks done; it gives up after settleWait.
func (s *Service) awaitSettled(done func() bool, again func()) {
	if done() {
		return
	}
	expired := false
	timer := time.AfterFunc(settleWait, func() {
		s.mu.Lock()
		expired = true
		s.settled.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for !expired {
		s.settled.Wait()
		again()
		if done() {
			return
		}
	}
}

func refusedForCapacity(err error) bool {
	return errors.Is(err, core.ErrNoCapacity) || errors.Is(err, core.ErrQuotaExceeded)
}
