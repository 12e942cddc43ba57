package service

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Spot work under budgets and quotas (see core/spotbudget.go): creating
// a preemptible job checks the team's quota and budget, the job loop
// starts none for a team whose budget cannot pay for its minimum run and
// preempts the team's runs, with the notice, before the budget runs out.
// A run stopped with its instances still there is charged when the last
// is gone (chargeUnbilled).

// checkSpotJob refuses a preemptible job of n instances of t for team at
// now beyond the team's quota (instances per block; instances held at
// once: its blocks' now and its open preemptible jobs', this one added)
// or its budget (SpotBudget.Afford). It returns the budget's guard, nil
// when the team has none.
func (s *Service) checkSpotJob(ctx context.Context, team string, t core.InstanceType, n int, now time.Time) (*core.BudgetGuard, error) {
	_, q, guard, err := s.buyerTerms(ctx, team, t.Name, now)
	if err != nil {
		return nil, err
	}
	open, err := s.store.ListJobs(ctx, team, true)
	if err != nil {
		return nil, fmt.Errorf("listing the open jobs of team %s: %w", team, err)
	}
	held := 0
	if q.MaxInstancesHeld > 0 {
		s.mu.RLock()
		held = s.index.Held(team, q.InstanceType, now, now.Add(time.Nanosecond))
		s.mu.RUnlock()
		for _, j := range open {
			if j.Preemptible && (q.InstanceType == "" || j.InstanceType == q.InstanceType) {
				held += j.InstanceCount
			}
		}
	}
	if err := core.CheckQuota(q, n, now, now, now, held); err != nil {
		return nil, err
	}
	budgets, err := s.spotBudgets(ctx, open, now, team)
	if err != nil {
		return nil, err
	}
	if b, ok := budgets[team]; ok {
		if err := b.Afford(n, t, s.fleet.Pricing); err != nil {
			return nil, err
		}
	}
	return guard, nil
}

// spotBudgets are the budgets, as spot work sees them at now, of the
// teams of the preemptible jobs among jobs (open jobs), and of teams,
// that have one: each one's limit less its ledger's net spend since the
// period began, less what its spot runs among jobs accrued (running, or
// stopped and not charged yet).
func (s *Service) spotBudgets(ctx context.Context, jobs []core.Job, now time.Time, teams ...string) (map[string]*core.SpotBudget, error) {
	for _, j := range jobs {
		if j.Preemptible {
			teams = append(teams, j.Team)
		}
	}
	out := map[string]*core.SpotBudget{}
	seen := map[string]bool{}
	for _, team := range teams {
		if seen[team] {
			continue
		}
		seen[team] = true
		g, err := s.budgetGuard(ctx, team, now)
		if err != nil {
			return nil, err
		}
		if g == nil {
			continue
		}
		spent, err := s.spentSince(ctx, g.Team, g.Since)
		if err != nil {
			return nil, err
		}
		out[team] = &core.SpotBudget{Team: team, Left: g.Limit.Minor - spent, Currency: g.Limit.Currency}
	}
	for _, j := range jobs {
		b := out[j.Team]
		t, ok := s.fleet.Type(j.InstanceType)
		if b == nil || !j.Preemptible || !ok {
			continue
		}
		if j.State == core.JobRunning && !j.RunStartedAt.IsZero() {
			b.Accrue(j, t, s.fleet.Pricing, now)
		}
		if run, ok := j.UnbilledRun(); ok {
			b.Accrue(run, t, s.fleet.Pricing, now)
		}
	}
	return out, nil
}

// spentSince is what a team's budget counts of its ledger at or after
// since: the sum the store's commit checks a guard against, read as one
// sum (a leader's pass with spot work open asks it every time, and the
// ledger's lines grow without end).
func (s *Service) spentSince(ctx context.Context, team string, since time.Time) (int64, error) {
	spent, err := s.store.Spent(ctx, team, since, s.fleet.Limits.BudgetCountsCredits)
	if err != nil {
		return 0, fmt.Errorf("reading the spend of team %s: %w", team, err)
	}
	return spent, nil
}

// budgetRunsOut is when the budget of each team of budgets is spent by
// its spot runs (zero: never, as they stand).
func budgetRunsOut(budgets map[string]*core.SpotBudget, now time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(budgets))
	for team, b := range budgets {
		out[team] = b.RunsOutAt(now)
	}
	return out
}

// chargeUnbilled charges run number run of job id, stopped and not
// charged yet (core.DeferSpotCharge), now that its last instance is gone:
// from its start to now, with the lending holders' credits, in a commit
// that clears it from the job. A conflict is decided again on the stored
// job; a run already charged is left alone. It reports whether it
// charged the run.
func (s *Service) chargeUnbilled(ctx context.Context, id string, run int) bool {
	for attempt := 1; ; attempt++ {
		j, err := s.store.Job(ctx, id)
		if err != nil {
			return false
		}
		ran, ok := j.UnbilledRun()
		if !ok || ran.Run != run {
			return false
		}
		now := s.clock.Now()
		next := j
		next.Unbilled = nil
		c := store.Change{Jobs: []store.JobWrite{{Job: next, ExpectedVersion: j.Version}}}
		c.Journals, c.Events = s.spotEntries(ctx, ran, now)
		err = s.store.Commit(ctx, c)
		if err == nil {
			if len(c.Events) > 0 {
				s.notifyEvents()
			}
			s.kickJobs() // the job may run again
			return true
		}
		if !store.IsConflict(err) || attempt == maxCommitAttempts {
			s.log.Warn("charging a stopped spot run", "job", id, "run", run, "err", err)
			return false
		}
	}
}

// chargeGoneRuns charges the unbilled runs of open jobs that have no
// instance left and no start waiting in the outbox: their last exit was
// handled by a leader that stopped before charging it, or their
// instances never started. The exit is what charges them otherwise. It
// reports whether it charged any.
func (s *Service) chargeGoneRuns(ctx context.Context, jobs []core.Job) bool {
	charged := false
	for _, j := range jobs {
		if j.Unbilled == nil {
			continue
		}
		key := runKey(core.Job{ID: j.ID, Run: j.Unbilled.Run})
		s.jobs.mu.Lock()
		live := len(s.jobs.live[key])
		s.jobs.mu.Unlock()
		if live > 0 {
			continue
		}
		ran, _ := j.UnbilledRun()
		if starting, err := s.startPending(ctx, ran); err != nil || starting {
			continue
		}
		if s.chargeUnbilled(ctx, j.ID, j.Unbilled.Run) {
			charged = true
		}
	}
	return charged
}
