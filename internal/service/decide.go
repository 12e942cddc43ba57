package service

import (
	"errors"
	"time"

	"capblock/internal/core"
)

// settleWait bounds how long a decision waits for the decisions in flight
// to settle: their commits take milliseconds, so past it the capacity is
// taken for good, or by a steady stream of other purchases.
const settleWait = 2 * time.Second

// decideLocked runs decide, which places a request on the index, with mu
// held. A request refused for want of capacity or quota while other
// decisions are in flight waits for them to settle and is decided again:
// what they hold is free again if their commits fail. So a purchase
// answers no_capacity only for capacity that is committed, or held for
// longer than settleWait. Searches never wait: they read assumed capacity
// as taken.
func (s *Service) decideLocked(decide func() error) error {
	err := decide()
	s.awaitSettled(func() bool {
		if !refusedForCapacity(err) || s.index.InFlight() == 0 {
			return true
		}
		err = decide()
		return !refusedForCapacity(err)
	})
	return err
}

// awaitSettled calls done, with mu held, now and each time a decision in
// flight settles, until it reports true or settleWait has passed.
func (s *Service) awaitSettled(done func() bool) {
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
		if done() {
			return
		}
	}
}

func refusedForCapacity(err error) bool {
	return errors.Is(err, core.ErrNoCapacity) || errors.Is(err, core.ErrQuotaExceeded)
}
