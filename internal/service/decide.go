package service

import (
	"errors"
	"time"

	"capblock/internal/core"
)

// settleWait bounds how long a decision refused for want of capacity
// waits for the decisions in flight to settle: their commits take
// milliseconds, so past it the capacity is taken for good, or by a steady
// stream of other purchases.
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
	if !refusedForCapacity(err) || s.index.InFlight() == 0 {
		return err
	}
	expired := false
	timer := time.AfterFunc(settleWait, func() {
		s.mu.Lock()
		expired = true
		s.settled.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for refusedForCapacity(err) && s.index.InFlight() > 0 && !expired {
		s.settled.Wait()
		err = decide()
	}
	return err
}

func refusedForCapacity(err error) bool {
	return errors.Is(err, core.ErrNoCapacity) || errors.Is(err, core.ErrQuotaExceeded)
}
