// Package clock provides the time source that capblock's service reads:
// the wall clock in production, and a simulated clock that only an admin
// call moves, so that a demo or a test can watch a block live its whole
// life in seconds.
package clock

import (
	"errors"
	"fmt"
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
// backwards, and it stays within [Earliest, Latest).
type Sim struct {
	mu  sync.Mutex
	now time.Time
}

// NewSim returns a simulated clock set to start.
func NewSim(start time.Time) *Sim { return &Sim{now: start.UTC()} }

// Earliest and Latest bound the simulated clock: it shows Earliest or
// later and always before Latest. The bound keeps every time derived from
// the clock (a block's end, an expiry, a period's start) well inside what
// RFC 3339 and the databases can represent: a clock moved past year 9999
// made every answer that carried a time impossible to encode.
var (
	Earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	Latest   = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

var (
	// ErrBackwards is returned when a move would take the clock back.
	ErrBackwards = errors.New("the simulated clock cannot go backwards")
	// ErrOutOfRange is returned when a move would take the clock outside
	// [Earliest, Latest).
	ErrOutOfRange = errors.New("time out of range")
)

// CheckRange returns an error wrapping ErrOutOfRange, naming the bound
// that t crosses, when t is outside [Earliest, Latest).
func CheckRange(t time.Time) error {
	switch {
	case t.Before(Earliest):
		return fmt.Errorf("%w: the simulated clock cannot show a time before %s", ErrOutOfRange, Earliest.Format(time.RFC3339))
	case !t.Before(Latest):
		return fmt.Errorf("%w: the simulated clock must stay before %s", ErrOutOfRange, Latest.Format(time.RFC3339))
	}
	return nil
}

// Now returns the simulated time.
func (s *Sim) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the clock forward by d. It leaves the clock where it was
// and returns an error wrapping ErrBackwards for a negative d, or
// ErrOutOfRange when the clock would reach Latest.
func (s *Sim) Advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return s.Now(), ErrBackwards
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.now.Add(d)
	if err := CheckRange(t); err != nil {
		return s.now, fmt.Errorf("advancing the simulated clock by %s to %s: %w", d, t.Format(time.RFC3339), err)
	}
	s.now = t
	return s.now, nil
}

// Set moves the clock to t, which must not be before the current time
// (ErrBackwards) and must be within [Earliest, Latest) (ErrOutOfRange). On
// an error the clock stays where it was.
func (s *Sim) Set(t time.Time) (time.Time, error) {
	if err := CheckRange(t); err != nil {
		return s.Now(), fmt.Errorf("setting the simulated clock to %s: %w", t.UTC().Format(time.RFC3339), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Before(s.now) {
		return s.now, ErrBackwards
	}
	s.now = t.UTC()
	return s.now, nil
}
