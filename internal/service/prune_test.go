package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// pruneRecorder is a store that records each PruneUsedOfferings call's
// before, sends it on calls when that is not nil, and fails with fail
// when set.
type pruneRecorder struct {
	store.Full
	calls chan time.Time

	mu      sync.Mutex
	befores []time.Time
	fail    error
}

func (r *pruneRecorder) PruneUsedOfferings(ctx context.Context, before time.Time) (int64, error) {
	r.mu.Lock()
	r.befores = append(r.befores, before)
	fail := r.fail
	r.mu.Unlock()
	if r.calls != nil {
		r.calls <- before
	}
	if fail != nil {
		return 0, fail
	}
	return r.Full.PruneUsedOfferings(ctx, before)
}

// newPruneEnv is a service with no fleet on a fresh SQLite store behind a
// pruneRecorder, on a simulated clock at t0, logging at debug level to
// the returned buffer.
func newPruneEnv(t *testing.T, t0 time.Time, calls chan time.Time) (*Service, *pruneRecorder, *clock.Sim, *syncBuffer) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "prune.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rec := &pruneRecorder{Full: st, calls: calls}
	sim := clock.NewSim(t0)
	logs := &syncBuffer{}
	svc, err := New(t.Context(), Config{Fleet: core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()},
		Store: rec, Clock: sim, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return svc, rec, sim, logs
}

// TestPruneUsedOfferingsHourly: the used offerings are pruned at the first
// call, then once the service clock has moved an hour since the last
// try, each time of those expired over an hour before the clock's now. A
// failure is a warning and waits its hour too.
func TestPruneUsedOfferingsHourly(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, rec, sim, logs := newPruneEnv(t, t0, nil)
	ctx := t.Context()
	var last time.Time
	step := func(d time.Duration) {
		t.Helper()
		if _, err := sim.Advance(d); err != nil {
			t.Fatal(err)
		}
		last = svc.pruneUsedOfferings(ctx, last)
	}
	step(0)                // t0: the first call prunes
	step(59 * time.Minute) // t0+59m: not an hour since
	step(time.Minute)      // t0+1h
	rec.fail = errors.New("disk I/O error")
	step(90 * time.Minute) // t0+2h30m: fails
	rec.fail = nil
	step(30 * time.Minute) // t0+3h: an hour has not passed since the failure
	step(30 * time.Minute) // t0+3h30m
	want := []time.Time{t0.Add(-time.Hour), t0, t0.Add(90 * time.Minute), t0.Add(150 * time.Minute)}
	if diff := cmp.Diff(want, rec.befores); diff != "" {
		t.Errorf("prunes' before (-want +got):\n%s", diff)
	}
	out := logs.String()
	for _, line := range []string{
		`level=DEBUG msg="pruned the used offerings" removed=0 "expired before"=2026-11-30T23:00:00.000Z`,
		`level=WARN msg="pruning the used offerings" "expired before"=2026-12-01T01:30:00.000Z err="disk I/O error"`,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the log has no line with %s:\n%s", line, out)
		}
	}
}

// TestLeaderPrunesUsedOfferings: the replica that runs the reconciler
// prunes the used offerings as it starts, and again after the simulated
// clock moves an hour.
func TestLeaderPrunesUsedOfferings(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	calls := make(chan time.Time, 16)
	svc, _, sim, _ := newPruneEnv(t, t0, calls)
	runService(t, svc)
	next := func() time.Time {
		t.Helper()
		select {
		case before := <-calls:
			return before
		case <-time.After(10 * time.Second):
			t.Fatal("the leader did not prune the used offerings within 10s")
			return time.Time{}
		}
	}
	if got, want := next(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("first prune: before %s, want %s", got, want)
	}
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := next(); !got.Equal(t0) {
		t.Fatalf("prune an hour later: before %s, want %s", got, t0)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
