package service

import (
	"context"
	"fmt"
	"sort"
	"time"

	"capblock/internal/backend"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Backfill: preemptible jobs run on GPUs that no block needs now (see
// core/backfill.go). They never enter the index, so searches and sales
// see their GPUs as free. The leader's job loop (reconcileBackfill)
// places waiting preemptible jobs, and preempts running ones a notice
// (limits.backfillNotice) before a block needs their GPUs: their
// instances get SIGTERM and are killed, if still there, just before.
// Each run is charged to its team at the spot price when it ends; the
// holder of a block that lent the GPUs is credited its share.

// backfillMargin is how long before the GPUs are needed a preempted
// run's instances still there are killed, so that they are gone before
// the block's start, whatever the timing of the loop.
func backfillMargin(notice time.Duration) time.Duration {
	return min(5*time.Second, notice/10)
}

// createBackfillJob records a preemptible job: no block, instances of a
// type, run where backfill allows.
func (s *Service) createBackfillJob(ctx context.Context, scope string, req contract.JobRequest) (core.Job, error) {
	if req.BlockID != "" || req.PlanID != "" {
		return core.Job{}, core.Invalidf("a preemptible job runs on no block or plan: give instanceType, not blockId or planId")
	}
	if req.InstanceType == "" {
		return core.Job{}, core.Invalidf("instanceType is required for a preemptible job, e.g. %q", s.exampleType())
	}
	t, ok := s.fleet.Type(req.InstanceType)
	if !ok {
		return core.Job{}, core.Invalidf("instance type %q is not sold here; see GET /v1/instance-types", req.InstanceType)
	}
	if req.Zone != "" && !s.hasZone(req.Zone) {
		return core.Job{}, core.Invalidf("zone %q is not in the fleet", req.Zone)
	}
	if err := checkJobRequest(req); err != nil {
		return core.Job{}, err
	}
	n := req.InstanceCount
	if n == 0 {
		n = 1
	}
	if n < 1 || n > s.fleet.Limits.MaxInstancesPerBlock {
		return core.Job{}, core.Invalidf("instanceCount %d: want 1 to %d", n, s.fleet.Limits.MaxInstancesPerBlock)
	}
	if req.MaxRestarts < 0 || req.MaxRestarts > 100 {
		return core.Job{}, core.Invalidf("maxRestarts %d: want 0 to 100", req.MaxRestarts)
	}
	team := scope
	switch {
	case scope != "" && req.Team != "" && req.Team != scope:
		return core.Job{}, fmt.Errorf("%w: team %s", core.ErrNotFound, req.Team)
	case scope == "" && req.Team == "":
		return core.Job{}, core.Invalidf("team is required: an admin names the team a preemptible job is for (and charged to)")
	case scope == "":
		if _, err := s.Team(ctx, "", req.Team); err != nil {
			return core.Job{}, err
		}
		team = req.Team
	}
	// Spot time is bought: nothing is bought for a disabled team, nor
	// beyond its quota or budget.
	now := s.clock.Now()
	guard, err := s.checkSpotJob(ctx, team, t, n, now)
	if err != nil {
		return core.Job{}, err
	}
	j := core.Job{ID: newID("job"), Name: req.Name, Team: team, Command: req.Command, Env: req.Env, InstanceCount: n,
		MaxRestarts: req.MaxRestarts, State: core.JobPending, CreatedAt: now, Preemptible: true, InstanceType: t.Name, Zone: req.Zone}
	c := store.Change{Jobs: []store.JobWrite{{Job: j}}, Events: []core.Event{s.jobEvent(now, core.EventJobPending, j, "")},
		Budgets: guards(guard)} // the stored spend, read again in the commit, is still within the budget
	if err := s.store.Commit(ctx, c); err != nil {
		return core.Job{}, fmt.Errorf("storing job %s: %w", j.ID, err)
	}
	s.notifyEvents()
	s.kickJobs()
	j.Version = 1
	return j, nil
}

func (s *Service) exampleType() string {
	if len(s.fleet.Types) > 0 {
		return s.fleet.Types[0].Name
	}
	return "h100.1x"
}

func (s *Service) hasZone(z string) bool {
	for _, n := range s.fleet.Nodes {
		if n.Zone == z {
			return true
		}
	}
	return false
}

// allocsOf are a preemptible job's allocations, named after it.
func allocsOf(j core.Job) []core.BackfillAlloc {
	out := make([]core.BackfillAlloc, len(j.Backfill))
	for i, a := range j.Backfill {
		a.ID = j.ID
		out[i] = a
	}
	return out
}

// neededAt is the earliest time any of allocs is needed (zero: none is).
func neededAt(allocs []core.BackfillAlloc) time.Time {
	var at time.Time
	for _, a := range allocs {
		if !a.NeededAt.IsZero() && (at.IsZero() || a.NeededAt.Before(at)) {
			at = a.NeededAt
		}
	}
	return at
}

// reconcileBackfill moves preemptible jobs on, on the leader: running
// ones whose GPUs are needed, or whose team's budget runs out, within the
// notice are preempted, instances of preempted runs still there when
// their kill is due are killed, and waiting ones are placed, oldest
// first, while their team's budget pays for their minimum run.
func (s *Service) reconcileBackfill(ctx context.Context, jobs []core.Job) {
	notice := s.fleet.Limits.BackfillNotice
	now := s.clock.Now()
	var running, pending []core.Job
	var taken []core.BackfillAlloc
	current := map[string]bool{}
	for _, j := range jobs {
		if !j.Preemptible {
			continue
		}
		switch j.State {
		case core.JobRunning:
			running = append(running, j)
			taken = append(taken, allocsOf(j)...)
			current[runKey(j)] = true
		case core.JobPending:
			pending = append(pending, j)
		}
	}
	// Runs that ended but whose instances still run (a preemption's
	// grace) keep their GPUs until the instances are gone.
	var lingers []lingering
	s.jobs.mu.Lock()
	ins := s.jobs.instances
	for key, h := range s.jobs.holds {
		if h.Preemptible && !current[key] && len(s.jobs.live[key]) > 0 {
			lingers = append(lingers, lingering{key: key, job: h})
		}
	}
	s.jobs.mu.Unlock()
	sort.Slice(lingers, func(a, b int) bool { return lingers[a].key < lingers[b].key })
	if len(running) == 0 && len(pending) == 0 && len(lingers) == 0 {
		return // nothing on backfill: no pass over the blocks
	}
	for _, l := range lingers {
		taken = append(taken, allocsOf(l.job)...)
	}
	lending := s.lendingNow(jobs)
	if s.chargeGoneRuns(ctx, pending) {
		return // decided again on the jobs as charged, at once (kickJobs)
	}
	// Teams' budgets: a team whose budget cannot pay for a job's minimum
	// run starts none, and its runs are preempted before it runs out.
	budgets, budgetErr := s.spotBudgets(ctx, jobs, now)
	if budgetErr != nil {
		s.log.Warn("reading the budgets of spot work; starting none", "err", budgetErr)
	}
	runsOut := budgetRunsOut(budgets, now)
	var broke []core.Job

	// 1. Decide under the index's read lock.
	type start struct {
		job    core.Job
		allocs []core.BackfillAlloc
	}
	var starts []start
	var expired []core.Job
	s.mu.RLock()
	due := make([][]core.BackfillAlloc, len(running))
	for i, j := range running {
		due[i] = s.index.BackfillDue(allocsOf(j), lending, now)
	}
	for i, l := range lingers {
		lingers[i].allocs = s.index.BackfillDue(allocsOf(l.job), lending, now)
	}
	for _, j := range pending {
		if _, _, ok := core.ExpireBackfillJob(j, now); ok {
			expired = append(expired, j)
			continue
		}
		t, ok := s.fleet.Type(j.InstanceType)
		if !ok || j.Unbilled != nil || budgetErr != nil {
			continue // its last run is not charged yet (gone within its notice), or budgets unknown
		}
		b := budgets[j.Team]
		if b != nil && b.Afford(j.InstanceCount, t, s.fleet.Pricing) != nil {
			broke = append(broke, j)
			continue
		}
		allocs, err := s.index.BackfillPlace(core.BackfillRequest{Type: t, Count: j.InstanceCount, Zone: j.Zone}, taken, lending, notice, now)
		if err != nil {
			continue // waits for backfill
		}
		for i := range allocs {
			allocs[i].ID = j.ID
		}
		taken = append(taken, allocs...)
		starts = append(starts, start{job: j, allocs: allocs})
		if b != nil {
			b.Left -= core.SpotMinimum(j.InstanceCount, t, s.fleet.Pricing).Minor // what the next start can count on
		}
	}
	s.mu.RUnlock()

	// 2. Preempt: SIGTERM now, the kill before the GPUs are needed, or
	//    before the team's budget runs out.
	margin := backfillMargin(notice)
	for i, j := range running {
		at, forBudget := spotEnd(neededAt(due[i]), runsOut[j.Team])
		if at.IsZero() || now.Before(at.Add(-notice)) {
			continue
		}
		preempt, why := core.PreemptJob, "its GPUs are needed"
		if forBudget {
			preempt, why = core.PreemptJobForBudget, "its team's budget runs out"
		}
		next, step, ok := preempt(j, max(at.Sub(now)-margin, time.Millisecond))
		if !ok {
			continue
		}
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("preempting a job", "job", j.ID, "err", err)
			continue
		}
		s.log.Info("preempted a job: "+why, "job", j.ID, "at", at, "grace", step.Grace)
	}
	// 3. Kill what is left of preempted runs when the GPUs are about to
	//    be needed, or at the kill their stop decided.
	if ins != nil {
		s.killLingering(ins, lingers, jobs, margin, now)
	}
	// 4. Fail what waited too long, say why what the budget cannot pay
	//    for waits, start what found GPUs.
	for _, j := range expired {
		next, step, _ := core.ExpireBackfillJob(j, now)
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("failing a preemptible job", "job", j.ID, "err", err)
		}
	}
	for _, j := range broke {
		if next, ok := core.WaitForBudget(j); ok {
			if err := s.commitJob(ctx, j, next, core.JobStep{}, now); err != nil {
				s.log.Warn("recording why a preemptible job waits", "job", j.ID, "err", err)
			}
		}
	}
	for _, st := range starts {
		next, step := core.StartBackfillJob(st.job, st.allocs, now)
		if err := s.commitJob(ctx, st.job, next, step, now); err != nil {
			s.log.Warn("starting a preemptible job", "job", st.job.ID, "err", err)
		}
	}
}

// lingering is a preemptible run that ended, with instances still
// there: key names it, job is the job as the run started, allocs are its
// GPUs with when each is needed.
type lingering struct {
	key    string
	job    core.Job
	allocs []core.BackfillAlloc
}

// killLingering kills the instances of the lingering runs whose GPUs are
// needed within margin, or whose stop's kill (a job of jobs, the open
// jobs, names it) is due.
func (s *Service) killLingering(ins backend.Instances, lingers []lingering, jobs []core.Job, margin time.Duration, now time.Time) {
	killAt := map[string]time.Time{}
	for _, j := range jobs {
		if j.Unbilled != nil && !j.Unbilled.KillAt.IsZero() {
			killAt[runKey(core.Job{ID: j.ID, Run: j.Unbilled.Run})] = j.Unbilled.KillAt
		}
	}
	for _, l := range lingers {
		at := neededAt(l.allocs)
		if !at.IsZero() {
			at = at.Add(-margin)
		}
		if k := killAt[l.key]; !k.IsZero() && (at.IsZero() || k.Before(at)) {
			at = k
		}
		if at.IsZero() || now.Before(at) {
			continue
		}
		s.jobs.mu.Lock()
		var live []int
		for inst := range s.jobs.live[l.key] {
			live = append(live, inst)
		}
		s.jobs.mu.Unlock()
		for _, inst := range live {
			if err := ins.Stop(l.key, inst, time.Millisecond); err != nil {
				s.log.Warn("removing a preempted instance", "run", l.key, "instance", inst, "err", err)
			}
		}
	}
}

// spotEnd is when a spot run must be gone: when its GPUs are needed, or
// when its team's budget runs out if that comes first (forBudget); zero
// when neither is known.
func spotEnd(needed, runsOut time.Time) (at time.Time, forBudget bool) {
	if !runsOut.IsZero() && (needed.IsZero() || runsOut.Before(needed)) {
		return runsOut, true
	}
	return needed, false
}

// backfillBlock is the block a preemptible run's instances see: its
// allocations as placements, instance i on the i-th, ending when its
// instances are to be killed as known now: before its GPUs are next
// needed or its team's budget runs out (or at the horizon).
func (s *Service) backfillBlock(j core.Job) core.Block {
	t, _ := s.fleet.Type(j.InstanceType)
	b := core.Block{ID: "backfill", Team: j.Team, InstanceType: j.InstanceType, GPUModel: t.GPUModel, Count: j.InstanceCount,
		Zone: j.Zone, State: core.StateActive, Start: j.RunStartedAt}
	for _, a := range j.Backfill {
		b.Placements = append(b.Placements, core.Placement{Node: a.Node, GPUs: a.GPUs})
	}
	ctx := context.Background()
	now := s.clock.Now()
	jobs, err := s.store.ListJobs(ctx, "", true)
	if err != nil {
		s.log.Warn("listing open jobs for a backfill run's end", "err", err)
	}
	lending := s.lendingNow(jobs)
	s.mu.RLock()
	needed := neededAt(s.index.BackfillDue(allocsOf(j), lending, now))
	s.mu.RUnlock()
	var team []core.Job
	for _, o := range jobs {
		if o.Team == j.Team {
			team = append(team, o)
		}
	}
	budgets, err := s.spotBudgets(ctx, team, now)
	if err != nil {
		s.log.Warn("reading the budget of a backfill run's team", "team", j.Team, "err", err)
	}
	var runsOut time.Time
	if b := budgets[j.Team]; b != nil {
		runsOut = b.RunsOutAt(now)
	}
	if at, _ := spotEnd(needed, runsOut); !at.IsZero() {
		b.End = at.Add(-backfillMargin(s.fleet.Limits.BackfillNotice))
	} else {
		b.End = now.Add(s.fleet.Limits.Horizon)
	}
	return b
}

// spotEntries charge a preemptible run that ends at now to its team, and
// credit the holders of the blocks that lent its GPUs; the events record,
// for each holder, the GPU-hours its block lent (block.lent).
func (s *Service) spotEntries(ctx context.Context, was core.Job, now time.Time) ([]core.Journal, []core.Event) {
	var evs []core.Event
	for id, gpus := range lentGPUs(was) {
		s.mu.RLock()
		b, ok := s.index.Block(id)
		var blk core.Block
		if ok {
			blk = *b
		}
		s.mu.RUnlock()
		if ok && now.After(was.RunStartedAt) {
			evs = append(evs, s.event(now, core.EventBlockLent, blk, map[string]any{"gpus": gpus,
				"from": was.RunStartedAt.UTC().Format(time.RFC3339), "until": now.UTC().Format(time.RFC3339)}))
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Subject < evs[j].Subject })
	t, ok := s.fleet.Type(was.InstanceType)
	if !ok {
		return nil, evs
	}
	charge := s.withinBudget(ctx, was.Team, core.SpotCharge(was, t, s.fleet.Pricing, now), now)
	if charge.Minor <= 0 {
		return nil, evs
	}
	secs := int64(now.Sub(was.RunStartedAt) / time.Second)
	onDemand := core.Money{Minor: (t.OnDemand.Minor*int64(was.InstanceCount)*secs + 1800) / 3600, Currency: t.OnDemand.Currency}
	// One journal: the run's charge to the operator's revenue, and out of
	// it the lenders' credits.
	j := core.Payment(newID("jr"), core.JournalSpot, now, was.Team, was.ID, t.Name, charge, onDemand, core.RevenueAccount)
	credits := core.LendCredits(was, charge, s.fleet.Limits.LendCreditPercent)
	ids := make([]string, 0, len(credits))
	for id := range credits {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.mu.RLock()
		b, ok := s.index.Block(id)
		team := ""
		if ok {
			team = b.Team
		}
		s.mu.RUnlock()
		if team == "" || credits[id].Minor <= 0 {
			continue
		}
		j.Postings = append(j.Postings,
			core.Posting{Account: core.RevenueAccount, Kind: core.PostingRevenue, Amount: -credits[id].Minor},
			core.Posting{Account: core.WalletAccount(team), Team: team, Kind: core.LedgerCredit, Amount: credits[id].Minor, Subject: id})
	}
	return []core.Journal{j}, evs
}

// withinBudget is charge, or what is left of the team's budget at now
// when that is less: a run that outlived the time its budget paid for
// (no leader stopped it in time) is not charged beyond it, since a
// team's budget is never exceeded (DESIGN.md, invariant 6); the
// operator bears the rest. Budgets that cannot be read charge all.
func (s *Service) withinBudget(ctx context.Context, team string, charge core.Money, now time.Time) core.Money {
	g, err := s.budgetGuard(ctx, team, now)
	if err != nil || g == nil {
		return charge
	}
	spent, err := s.spentSince(ctx, g.Team, g.Since)
	if err != nil {
		s.log.Warn("reading a team's spend to charge a spot run", "team", team, "err", err)
		return charge
	}
	if left := g.Limit.Minor - spent; charge.Minor > left {
		s.log.Warn("a spot run outlived its budget; charged what was left", "team", team, "charge", charge.Minor, "left", left)
		charge.Minor = max(left, 0)
	}
	return charge
}

// lentGPUs counts, by lending block, the GPUs a preemptible job's run
// holds on lent GPUs.
func lentGPUs(j core.Job) map[string]int {
	var out map[string]int
	for _, a := range j.Backfill {
		if a.Lent == "" {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[a.Lent] += len(a.GPUs)
	}
	return out
}

// SetLending turns the lending of a live block's GPUs to backfill on or
// off. Backfill on them is credited to the block's team (limits'
// lendCreditPercent of its spot price) and counted as lent in its
// utilisation. A job of the holder's on a lending block starts once the
// backfill there is gone: within the notice.
func (s *Service) SetLending(ctx context.Context, scope, id string, on bool) (core.Block, error) {
	b, err := s.mutate(ctx, scope, id, func(b core.Block, now time.Time) (store.Change, error) {
		if !b.State.Live() {
			return store.Change{}, fmt.Errorf("%w: block %s is %s: only a scheduled or active block lends its GPUs", core.ErrInvalidState, b.ID, b.State)
		}
		next := b
		next.Lending = on
		return store.Change{Update: []store.BlockUpdate{{Block: next, ExpectedVersion: b.Version}},
			Events: []core.Event{s.event(now, core.EventBlockLending, next, map[string]any{"lending": on})}}, nil
	})
	if err == nil {
		s.notifyEvents()
		s.kickJobs()
	}
	return b, err
}

// lendingNow are the active blocks that lend their GPUs now, each with
// when its holder needs them back: a running job of the holder's there
// needs them since it started; a waiting one, the notice after it was
// created (the holder's job waits at most that for backfill to leave).
// jobs are the open jobs.
func (s *Service) lendingNow(jobs []core.Job) []core.Lending {
	now := s.clock.Now()
	need := map[string]time.Time{}
	for _, j := range jobs {
		if j.Preemptible || j.BlockID == "" {
			continue
		}
		at := j.CreatedAt.Add(s.fleet.Limits.BackfillNotice)
		switch j.State {
		case core.JobRunning:
			at = j.StartedAt
		case core.JobInterrupted:
			at = now
		case core.JobPending:
		default:
			continue
		}
		if cur, ok := need[j.BlockID]; !ok || at.Before(cur) {
			need[j.BlockID] = at
		}
	}
	var out []core.Lending
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, b := range s.index.Blocks() {
		if b.Lending && b.State == core.StateActive && !now.Before(b.Start) && now.Before(b.End) {
			out = append(out, core.Lending{BlockID: b.ID, NeededAt: need[b.ID]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BlockID < out[j].BlockID })
	return out
}

// backfillOn reports whether backfill still runs on GPUs lent by block
// id: a running preemptible job's, or a preempted run's still there.
func (s *Service) backfillOn(id string, jobs []core.Job) bool {
	on := func(j core.Job) bool {
		for _, a := range j.Backfill {
			if a.Lent == id {
				return true
			}
		}
		return false
	}
	for _, j := range jobs {
		if j.Preemptible && j.State == core.JobRunning && on(j) {
			return true
		}
	}
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	for key, h := range s.jobs.holds {
		if h.Preemptible && len(s.jobs.live[key]) > 0 && on(h) {
			return true
		}
	}
	return false
}
