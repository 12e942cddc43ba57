package core

import "time"

// Preemptible jobs: a job with no block that runs on backfill. It waits
// pending until BackfillPlace finds its GPUs, runs there, and when its
// GPUs are needed within the notice it is preempted: its run is stopped
// (SIGTERM, then a kill before the GPUs are needed) and it waits again,
// to run anew from its checkpoint directory wherever backfill allows.
// The same befalls it when its team's budget runs out (spotbudget.go).
// A stopped run is charged when its last instance is gone.

// Reasons of preemptible jobs.
const (
	ReasonPreempted          = "preempted"
	ReasonWaitingForBackfill = "waiting_for_backfill"
	// ReasonBudgetExceeded: the team's budget cannot pay for more spot
	// time; the job was preempted before it ran out, or waits.
	ReasonBudgetExceeded = "budget_exceeded"
)

// StartBackfillJob starts a new run of a pending preemptible job on the
// allocations BackfillPlace gave it (one per instance).
func StartBackfillJob(j Job, allocs []BackfillAlloc, now time.Time) (Job, JobStep) {
	j.State, j.Run, j.Done, j.Reason = JobRunning, j.Run+1, nil, ""
	j.Backfill = append([]BackfillAlloc(nil), allocs...)
	if j.StartedAt.IsZero() {
		j.StartedAt = now
	}
	j.RunStartedAt = now
	return j, JobStep{Event: EventJobRunning, Start: true}
}

// PreemptJob stops a running preemptible job's run because its GPUs are
// needed: the job waits again, pending, for backfill. grace is how long
// its instances have from SIGTERM to the kill.
func PreemptJob(j Job, grace time.Duration) (Job, JobStep, bool) {
	if !j.Preemptible || j.State != JobRunning {
		return j, JobStep{}, false
	}
	j.State, j.Reason, j.Done, j.Backfill = JobPending, ReasonPreempted, nil, nil
	return j, JobStep{Event: EventJobInterrupted, Stop: true, Grace: max(grace, 0), Reason: ReasonPreempted}, true
}

// PreemptJobForBudget is PreemptJob when the team's budget runs out,
// rather than the GPUs being needed: the job waits again, for budget.
func PreemptJobForBudget(j Job, grace time.Duration) (Job, JobStep, bool) {
	next, step, ok := PreemptJob(j, grace)
	if ok {
		next.Reason, step.Reason = ReasonBudgetExceeded, ReasonBudgetExceeded
	}
	return next, step, ok
}

// WaitForBudget keeps a pending preemptible job waiting because its
// team's budget cannot pay for its minimum run; ok is false when it
// already waited for that (nothing to store).
func WaitForBudget(j Job) (Job, bool) {
	if !j.Preemptible || j.State != JobPending || j.Reason == ReasonBudgetExceeded {
		return j, false
	}
	j.Reason = ReasonBudgetExceeded
	return j, true
}

// ExpireBackfillJob fails a preemptible job that has waited MaxPending
// since it was created without ever running.
func ExpireBackfillJob(j Job, now time.Time) (Job, JobStep, bool) {
	if !j.Preemptible || j.State != JobPending || !j.StartedAt.IsZero() || now.Sub(j.CreatedAt) < MaxPending {
		return j, JobStep{}, false
	}
	j.State, j.Reason, j.EndedAt = JobFailed, ReasonInsufficientCapacity, now
	return j, JobStep{Event: EventJobFailed, Reason: ReasonInsufficientCapacity}, true
}

// BackfillRunEnds reports whether a decision from was to next ends a
// preemptible job's run, so that the run is charged.
func BackfillRunEnds(was, next Job, step JobStep) bool {
	return was.Preemptible && was.State == JobRunning && !was.RunStartedAt.IsZero() &&
		(step.Stop || next.State != JobRunning || next.Run != was.Run)
}

// SpotRun is one run of a preemptible job as it is charged: its number,
// when it started, and the GPUs it ran on. KillAt, for a stopped run, is
// when what is left of it is killed; zero when that is the runner's own
// grace after the stop.
type SpotRun struct {
	Run       int
	StartedAt time.Time
	Backfill  []BackfillAlloc
	KillAt    time.Time
}

// DeferSpotCharge keeps the run that a decision from was to next stops
// unbilled in next, when no new run takes its place: its instances get
// SIGTERM and may run on until killAt, so it is charged when the last is
// gone. A decision that starts a new run in the same step (a restart)
// charges the run at once, as the new run is charged from now on the
// same GPUs. ok is false when nothing is deferred.
func DeferSpotCharge(was, next Job, step JobStep, killAt time.Time) (Job, bool) {
	if !BackfillRunEnds(was, next, step) || !step.Stop || step.Start {
		return next, false
	}
	next.Unbilled = &SpotRun{Run: was.Run, StartedAt: was.RunStartedAt, Backfill: append([]BackfillAlloc(nil), was.Backfill...), KillAt: killAt}
	return next, true
}

// UnbilledRun is the job as its unbilled run ran (its run number, start
// and GPUs), what SpotCharge and LendCredits take; ok is false when it
// has none.
func (j Job) UnbilledRun() (Job, bool) {
	if j.Unbilled == nil {
		return j, false
	}
	r := j
	r.State, r.Run, r.RunStartedAt, r.Backfill, r.Unbilled = JobRunning, j.Unbilled.Run, j.Unbilled.StartedAt, j.Unbilled.Backfill, nil
	return r, true
}

// SpotCharge is what a preemptible run of j's instances of type t costs
// from its start to end: the spot factor of the on-demand price, per
// second, rounded to the nearest minor unit.
func SpotCharge(j Job, t InstanceType, p Pricing, end time.Time) Money {
	secs := int64(end.Sub(j.RunStartedAt) / time.Second)
	if secs <= 0 {
		return Money{Currency: t.OnDemand.Currency}
	}
	num := t.OnDemand.Minor * p.SpotBP * int64(j.InstanceCount) * secs
	const den = 10000 * 3600
	return Money{Minor: (num + den/2) / den, Currency: t.OnDemand.Currency}
}

// LendCredits splits the credit of a preemptible run's charge among the
// blocks that lent its instances' GPUs: percent of each lent instance's
// share of the charge, by block id.
func LendCredits(j Job, charge Money, percent int) map[string]Money {
	if len(j.Backfill) == 0 || charge.Minor <= 0 || percent <= 0 {
		return nil
	}
	out := map[string]Money{}
	for _, a := range j.Backfill {
		if a.Lent == "" {
			continue
		}
		m := out[a.Lent]
		m.Currency = charge.Currency
		m.Minor += charge.Minor * int64(percent) / (100 * int64(len(j.Backfill)))
		out[a.Lent] = m
	}
	return out
}
