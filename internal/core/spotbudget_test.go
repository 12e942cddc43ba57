package core

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// spotH100 is an h100.8x at 98.32 an hour on demand: 29.496 an hour at
// the default spot factor of 0.3.
var spotH100 = InstanceType{Name: "h100.8x", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}}

func TestSpotBudget(t *testing.T) {
	now := indexNow
	p := DefaultPricing()
	for name, c := range map[string]struct {
		left   int64
		runs   []Job // running since their RunStartedAt
		count  int   // of the job that would start
		afford bool
		out    time.Duration // from now; -1: never
	}{
		"nothing runs, an hour left": {left: 2950, count: 1, afford: true, out: -1},
		"nothing runs, less":         {left: 2949, count: 1, afford: false, out: -1},
		"an hour of one, not of two": {left: 3000, count: 2, afford: false, out: -1},
		"over the budget":            {left: -5, count: 1, afford: false, out: -1},
		// 30.00 at 29.496 an hour: 1h01m01s.
		"one run just started": {left: 3000, runs: []Job{{InstanceCount: 1, RunStartedAt: now}}, count: 1, afford: true, out: time.Hour + 61*time.Second},
		// 52 minutes ran (25.56): 4.44 left, 9m01s more.
		"one run for 52 minutes": {left: 3000, runs: []Job{{InstanceCount: 1, RunStartedAt: now.Add(-52 * time.Minute)}}, count: 1, afford: false, out: 541 * time.Second},
		// Two instances spend twice as fast.
		"two instances": {left: 3000, runs: []Job{{InstanceCount: 2, RunStartedAt: now}}, count: 1, afford: true, out: 30*time.Minute + 30*time.Second},
		"spent":         {left: 2556, runs: []Job{{InstanceCount: 1, RunStartedAt: now.Add(-52 * time.Minute)}}, count: 1, afford: false, out: 0},
	} {
		b := SpotBudget{Team: "t", Left: c.left, Currency: "USD"}
		for _, r := range c.runs {
			b.Accrue(r, spotH100, p, now)
		}
		err := b.Afford(c.count, spotH100, p)
		if (err == nil) != c.afford || (err != nil && !errors.Is(err, ErrBudgetExceeded)) {
			t.Errorf("%s: Afford = %v, want affordable %v", name, err, c.afford)
		}
		want := time.Time{}
		if c.out >= 0 {
			want = now.Add(c.out)
		}
		if got := b.RunsOutAt(now); !got.Equal(want) {
			t.Errorf("%s: RunsOutAt = %s, want %s", name, got, want)
		}
	}
}

// TestSpotChargeDeferred: a run stopped with nothing in its place (a
// preemption, a user's stop, a failure that stops the other instances)
// stays unbilled in the job, with its start, GPUs and kill; a restart,
// whose new run is charged from now, and an end without a stop (the last
// instance exited) are charged at once.
func TestSpotChargeDeferred(t *testing.T) {
	now := indexNow
	j := Job{ID: "job-1", Team: "t", Preemptible: true, InstanceType: "h100.8x", InstanceCount: 1, State: JobPending, CreatedAt: now}
	run, _ := StartBackfillJob(j, []BackfillAlloc{{Node: "n1", GPUs: gpus(0, 8), Lent: "cb-l"}}, now)
	kill := now.Add(time.Hour)

	pre, step, _ := PreemptJobForBudget(run, 50*time.Minute)
	if pre.Reason != ReasonBudgetExceeded || step.Reason != ReasonBudgetExceeded || !step.Stop {
		t.Errorf("preempted for budget: %+v %+v", pre, step)
	}
	got, ok := DeferSpotCharge(run, pre, step, kill)
	want := &SpotRun{Run: 1, StartedAt: now, Backfill: run.Backfill, KillAt: kill}
	if diff := cmp.Diff(want, got.Unbilled); !ok || diff != "" {
		t.Errorf("a preemption's run (-want +got):\n%s", diff)
	}
	ran, ok := got.UnbilledRun()
	if !ok || ran.Run != 1 || !ran.RunStartedAt.Equal(now) || len(ran.Backfill) != 1 || ran.Unbilled != nil {
		t.Errorf("the unbilled run as it ran: %+v", ran)
	}

	retried := run
	retried.MaxRestarts = 1
	restarted, step, _ := JobExited(retried, 0, 1, now)
	if _, ok := DeferSpotCharge(retried, restarted, step, kill); ok || !step.Start {
		t.Errorf("a restart's run deferred: %+v", step)
	}
	failed, step, _ := JobExited(run, 0, 1, now)
	if f, ok := DeferSpotCharge(run, failed, step, kill); !ok || f.Unbilled == nil {
		t.Error("a failure that stops the run's instances charged it at once")
	}
	done, step, _ := JobExited(run, 0, 0, now)
	if _, ok := DeferSpotCharge(run, done, step, kill); ok || !BackfillRunEnds(run, done, step) {
		t.Error("a run whose last instance exited is not charged at once")
	}
	if _, ok := DeferSpotCharge(j, j, JobStep{}, kill); ok {
		t.Error("a waiting job's decision deferred a charge")
	}
	if next, ok := WaitForBudget(pre); ok || next.Reason != ReasonBudgetExceeded {
		t.Errorf("waiting again for budget: %+v %v", next, ok)
	}
	if next, ok := WaitForBudget(Job{Preemptible: true, State: JobPending, Reason: ReasonPreempted}); !ok || next.Reason != ReasonBudgetExceeded {
		t.Errorf("waiting for budget: %+v %v", next, ok)
	}
}
