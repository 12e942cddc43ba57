package clock

import (
	"errors"
	"testing"
	"time"
)

var start = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func TestSimMoves(t *testing.T) {
	tests := map[string]struct {
		move    func(*Sim) (time.Time, error)
		wantNow time.Time
		wantErr error
	}{
		"advance": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(6 * time.Hour) },
			wantNow: start.Add(6 * time.Hour),
		},
		"advance by nothing": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(0) },
			wantNow: start,
		},
		"advance backwards": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(-time.Hour) },
			wantNow: start,
			wantErr: ErrBackwards,
		},
		"advance to the limit": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(Latest.Sub(start)) },
			wantNow: start,
			wantErr: ErrOutOfRange,
		},
		"advance to just before the limit": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(Latest.Sub(start) - time.Nanosecond) },
			wantNow: Latest.Add(-time.Nanosecond),
		},
		"advance by the longest duration": {
			move:    func(s *Sim) (time.Time, error) { return s.Advance(time.Duration(1<<63 - 1)) },
			wantNow: start,
			wantErr: ErrOutOfRange,
		},
		"set": {
			move:    func(s *Sim) (time.Time, error) { return s.Set(start.Add(time.Hour).In(time.FixedZone("x", 3600))) },
			wantNow: start.Add(time.Hour),
		},
		"set backwards": {
			move:    func(s *Sim) (time.Time, error) { return s.Set(start.Add(-time.Hour)) },
			wantNow: start,
			wantErr: ErrBackwards,
		},
		"set to the limit": {
			move:    func(s *Sim) (time.Time, error) { return s.Set(Latest) },
			wantNow: start,
			wantErr: ErrOutOfRange,
		},
		"set past year 9999": {
			move:    func(s *Sim) (time.Time, error) { return s.Set(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) },
			wantNow: start,
			wantErr: ErrOutOfRange,
		},
		"set before the earliest": {
			move:    func(s *Sim) (time.Time, error) { return s.Set(Earliest.Add(-time.Second)) },
			wantNow: start,
			wantErr: ErrOutOfRange,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewSim(start)
			got, err := tc.move(s)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if !got.Equal(tc.wantNow) || !s.Now().Equal(tc.wantNow) {
				t.Errorf("returned %s, clock shows %s; want %s", got, s.Now(), tc.wantNow)
			}
		})
	}
}

func TestCheckRangeNamesTheBound(t *testing.T) {
	tests := map[time.Time]string{
		Earliest.Add(-time.Nanosecond): "cannot show a time before 2000-01-01T00:00:00Z",
		Latest:                         "must stay before 2200-01-01T00:00:00Z",
	}
	for at, want := range tests {
		err := CheckRange(at)
		if !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("CheckRange(%s) = %v, want ErrOutOfRange", at, err)
		}
		if got := err.Error(); got != "time out of range: the simulated clock "+want {
			t.Errorf("CheckRange(%s) = %q, want it to say %q", at, got, want)
		}
	}
	for _, at := range []time.Time{Earliest, Latest.Add(-time.Nanosecond), start} {
		if err := CheckRange(at); err != nil {
			t.Errorf("CheckRange(%s) = %v, want nil", at, err)
		}
	}
}
