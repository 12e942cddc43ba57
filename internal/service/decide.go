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
// (any when ""), over a window.
type want struct {
	gpuModel, zone string
	start, end     time.Time
}

// decideLocked runs decide, which places a request for w on the index,
// with mu held. A request refused for want of capacity or quota while a
// decision in flight changes blocks of that capacity waits for the
// decisions to settle and is decided again: what they hold is free again
// if their commits fail. So a purchase answers no_capacity only for
// capacity that is committed, or held in flight for longer than
// settleWait; decisions on other capacity never hold it up. Searches
// never wait: they read assumed capacity as taken.
func (s *Service) decideLocked(w want, decide func() error) error {
	err := decide()
	s.awaitSettled(func() bool {
		return !refusedForCapacity(err) || !s.index.InFlightOn(w.gpuModel, w.zone, w.start, w.end)
	}, func() { err = decide() })
	return err
}

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
