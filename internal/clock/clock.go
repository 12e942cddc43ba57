// Package clock provides the time source that capblock's service reads:
// the wall clock in production, and a simulated clock that only an admin
// call moves, so that a demo or a test can watch a block live its whole
// life in seconds.
package clock

import (
	"errors"
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Wall is the real clock, in UTC.
type Wall struct{}

// Now returns the current UTC time.
func (Wall) Now() time.Time { return time.Now().UTC() }

// Sim is a simulated clock that stands still until moved. It never goes
// backwards.
type Sim struct {
	mu  sync.Mutex
	now time.Time
}

// NewSim returns a simulated clock set to start.
func NewSim(start time.Time) *Sim { return &Sim{now: start.UTC()} }

// ErrBackwards is returned when a move would take the clock back.
var ErrBackwards = errors.New("the simulated clock cannot go backwards")

// Now returns the simulated time.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the clock forward by d.
func (s *Sim) Advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return s.Now(), ErrBackwards
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	return s.now, nil
}

// Set moves the clock to t, which must not be before the current time.
func (s *Sim) Set(t time.Time) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Before(s.now) {
		return s.now, ErrBackwards
	}
	s.now = t.UTC()
	return s.now, nil
}
