package core

import (
	"testing"
	"time"
)

func TestBackfillJobLifecycle(t *testing.T) {
	now := indexNow
	j := Job{ID: "job-1", Team: "t", Preemptible: true, InstanceType: "h100.8x", InstanceCount: 2, State: JobPending, CreatedAt: now}
	allocs := []BackfillAlloc{{Node: "n1", GPUs: gpus(0, 8)}, {Node: "n2", GPUs: gpus(0, 8), Lent: "cb-l"}}
	run, step := StartBackfillJob(j, allocs, now)
	if run.State != JobRunning || run.Run != 1 || !step.Start || !run.RunStartedAt.Equal(now) || len(run.Backfill) != 2 {
		t.Fatalf("start: %+v %+v", run, step)
	}
	pre, step, ok := PreemptJob(run, 9*time.Minute)
	if !ok || pre.State != JobPending || pre.Reason != ReasonPreempted || !step.Stop || step.Grace != 9*time.Minute || pre.Backfill != nil {
		t.Fatalf("preempt: %+v %+v %v", pre, step, ok)
	}
	if !BackfillRunEnds(run, pre, step) {
		t.Error("a preemption does not end the run")
	}
	if _, _, ok := PreemptJob(pre, time.Minute); ok {
		t.Error("a waiting job preempted")
	}
	// A job on a block is not preemptible.
	onBlock := run
	onBlock.Preemptible = false
	if _, _, ok := PreemptJob(onBlock, time.Minute); ok {
		t.Error("a job on a block preempted")
	}
	// 2 × h100.8x at 98.32 an hour, spot 0.3, for 90 minutes: 88.488.
	typ := InstanceType{Name: "h100.8x", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}}
	charge := SpotCharge(run, typ, DefaultPricing(), now.Add(90*time.Minute))
	if charge != (Money{Minor: 8849, Currency: "USD"}) {
		t.Errorf("charge %v, want 88.49 USD", charge)
	}
	// Half the run was on lent GPUs: 50% of that half.
	credits := LendCredits(run, charge, 50)
	if len(credits) != 1 || credits["cb-l"].Minor != 8849*50/200 {
		t.Errorf("credits %v, want %d to cb-l", credits, 8849*50/200)
	}
	// Never started and waited MaxPending: it fails.
	if _, _, ok := ExpireBackfillJob(j, now.Add(MaxPending-time.Second)); ok {
		t.Error("expired early")
	}
	if f, _, ok := ExpireBackfillJob(j, now.Add(MaxPending)); !ok || f.State != JobFailed {
		t.Errorf("not expired after MaxPending: %+v", f)
	}
	if _, _, ok := ExpireBackfillJob(pre, now.Add(MaxPending)); ok {
		t.Error("a job that ran expired")
	}
}
