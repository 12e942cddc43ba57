package service

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

// TestReconcileStepsWhatIsDue stores blocks whose steps fall at
// different hours and reconciles hour by hour: each pass takes exactly
// the steps due by then, whichever blocks are stored, and the index's
// next due time follows each commit.
func TestReconcileStepsWhatIsDue(t *testing.T) {
	e := newPlanEnv(t,
		wholeNode("a", "n0", 2, 6),
		wholeNode("b", "n1", 3, 5),
		wholeNode("c", "n0", 8, 9),
	)
	type state struct {
		ID          string
		State       core.BlockState
		Terminating bool
	}
	states := func() []state {
		var out []state
		for _, id := range []string{"a", "b", "c"} {
			b, err := e.st.GetBlock(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, state{id, b.State, b.Terminating})
		}
		return out
	}
	want := map[int][]state{
		1: {{"a", core.StateScheduled, false}, {"b", core.StateScheduled, false}, {"c", core.StateScheduled, false}},
		2: {{"a", core.StateActive, false}, {"b", core.StateScheduled, false}, {"c", core.StateScheduled, false}},
		3: {{"a", core.StateActive, false}, {"b", core.StateActive, false}, {"c", core.StateScheduled, false}},
		5: {{"a", core.StateActive, false}, {"b", core.StateExpired, true}, {"c", core.StateScheduled, false}},
		6: {{"a", core.StateExpired, true}, {"b", core.StateExpired, true}, {"c", core.StateScheduled, false}},
		9: {{"a", core.StateExpired, true}, {"b", core.StateExpired, true}, {"c", core.StateExpired, true}},
	}
	nextDue := map[int]time.Time{
		1: planHour(2), 2: planHour(3), 3: planHour(5).Add(-40 * time.Minute),
		5: planHour(6).Add(-40 * time.Minute), 6: planHour(8), // c, once a and b are gone
	}
	for _, h := range []int{1, 2, 3, 5, 6, 9} {
		if _, err := e.sim.Set(planHour(h)); err != nil {
			t.Fatal(err)
		}
		if err := e.svc.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[h], states()); diff != "" {
			t.Errorf("at hour %d (-want +got):\n%s", h, diff)
		}
		next, ok := e.svc.nextDue()
		if w, due := nextDue[h]; ok != due || !next.Equal(w) {
			t.Errorf("at hour %d: next due %s, %v; want %s, %v", h, next, ok, w, due)
		}
	}
}

// TestReconcileRebasesWithNothingDue: a pass with no step due still moves
// the index's hour 0 once it is a day old, and the blocks stay indexed.
func TestReconcileRebasesWithNothingDue(t *testing.T) {
	e := newPlanEnv(t, wholeNode("a", "n0", 100, 110))
	if _, err := e.sim.Set(planHour(30)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.index.Origin; !got.Equal(planHour(30)) {
		t.Errorf("index origin %s after a pass at hour 30; want %s", got, planHour(30))
	}
	if next, ok := e.svc.nextDue(); !ok || !next.Equal(planHour(100)) {
		t.Errorf("next due %s, %v after the rebase; want hour 100", next, ok)
	}
}

// TestReconcileWithNothingDueTakesNoWriteLock: a pass with nothing due
// (every tick of a simulated clock) reads under the shared lock only, so
// it never waits for, nor holds up, searches. The test holds the lock
// shared meanwhile: a pass that wanted it exclusively would block.
func TestReconcileWithNothingDueTakesNoWriteLock(t *testing.T) {
	e := newPlanEnv(t, wholeNode("a", "n0", 2, 6))
	e.svc.mu.RLock()
	done := make(chan error, 1)
	go func() { done <- e.svc.Reconcile(t.Context()) }()
	select {
	case err := <-done:
		e.svc.mu.RUnlock()
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		e.svc.mu.RUnlock()
		<-done
		t.Error("a pass with nothing due waited for the lock held shared")
	}
}
