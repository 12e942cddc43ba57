package service

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Utilisation is computed from stored data only, so that every replica
// agrees: blocks (their GPUs and windows), jobs (their instance counts)
// and the jobs' events, whose times mark each run's start (an event in
// state running) and end (the job's next event in another state, or a
// new run). A run uses its instances' GPUs of its block while it runs.
// GPU-hours lent to backfill are read from the holder's block.lent events,
// one per preemptible run on a lending block's GPUs, stored when the run
// ends (a run still going counts once it ends).

// Utilisation reports what became of reserved GPU-hours over [from, to).
func (s *Service) Utilisation(ctx context.Context, scope, team string, from, to time.Time) (contract.UtilisationReport, error) {
	if team == "" {
		team = scope
	} else if _, err := s.Team(ctx, scope, team); err != nil {
		return contract.UtilisationReport{}, err
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		return contract.UtilisationReport{}, core.Invalidf("the window ends at %s, not after its start %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	now := s.clock.Now()
	blocks, runs, err := s.usage(ctx, team, nil)
	if err != nil {
		return contract.UtilisationReport{}, err
	}
	rep := contract.UtilisationReport{From: from, To: to, Blocks: []contract.UtilisationRow{}, Plans: []contract.UtilisationRow{}, Teams: []contract.UtilisationRow{}}
	plans, teams := map[string]*core.Utilisation{}, map[string]*core.Utilisation{}
	planTeam := map[string]string{}
	var total core.Utilisation
	for _, b := range blocks {
		u := core.BlockUtilisation(b, runs, from, to, now)
		if u.Reserved == 0 {
			continue
		}
		rep.Blocks = append(rep.Blocks, contract.UtilisationRow{Team: b.Team, BlockID: b.ID, PlanID: b.PlanID,
			InstanceType: b.InstanceType, GPUHours: contract.GPUHoursOf(u)})
		add(teams, b.Team, u)
		if b.PlanID != "" {
			add(plans, b.PlanID, u)
			planTeam[b.PlanID] = b.Team
		}
		total = total.Add(u)
	}
	for _, id := range sortedKeys(plans) {
		rep.Plans = append(rep.Plans, contract.UtilisationRow{Team: planTeam[id], PlanID: id, GPUHours: contract.GPUHoursOf(*plans[id])})
	}
	for _, t := range sortedKeys(teams) {
		rep.Teams = append(rep.Teams, contract.UtilisationRow{Team: t, GPUHours: contract.GPUHoursOf(*teams[t])})
	}
	rep.Total = contract.GPUHoursOf(total)
	return rep, nil
}

// blockUtilisation is one block's utilisation so far. The jobs' events
// are read only when a job of the team ran on the block (or its plan).
func (s *Service) blockUtilisation(ctx context.Context, b core.Block) (core.Utilisation, error) {
	_, runs, err := s.usage(ctx, b.Team, func(j core.Job) bool {
		return j.BlockID == b.ID || (b.PlanID != "" && j.PlanID == b.PlanID)
	})
	if err != nil {
		return core.Utilisation{}, err
	}
	return core.BlockUtilisation(b, runs, time.Time{}, time.Time{}, s.clock.Now()), nil
}

// monthlyUtilisation is a team's utilisation ("" for every team) per
// team, instance type and month (UTC) over [from, to), for Spend.
func (s *Service) monthlyUtilisation(ctx context.Context, team string, from, to time.Time) (map[[3]string]core.Utilisation, error) {
	now := s.clock.Now()
	blocks, runs, err := s.usage(ctx, team, nil)
	if err != nil {
		return nil, err
	}
	out := map[[3]string]core.Utilisation{}
	for _, b := range blocks {
		if b.State != core.StateActive && b.State != core.StateExpired {
			continue
		}
		end := b.End
		if end.After(now) {
			end = now
		}
		for m := monthOf(b.Start); m.Before(end); m = m.AddDate(0, 1, 0) {
			ms, me := m, m.AddDate(0, 1, 0)
			if !from.IsZero() && ms.Before(from) {
				ms = from
			}
			if !to.IsZero() && me.After(to) {
				me = to
			}
			if !me.After(ms) {
				continue
			}
			if u := core.BlockUtilisation(b, runs, ms, me, now); u.Reserved > 0 {
				k := [3]string{b.Team, b.InstanceType, m.Format("2006-01")}
				out[k] = out[k].Add(u)
			}
		}
	}
	return out, nil
}

// usage reads a team's blocks ("" for every team's) and the runs of its
// jobs; with concerns set, the jobs' events are read only when a job
// concerns the caller (the events are the costly part).
func (s *Service) usage(ctx context.Context, team string, concerns func(core.Job) bool) ([]core.Block, []core.RunSpan, error) {
	blocks, err := s.store.ListBlocks(ctx, store.BlockFilter{Team: team})
	if err != nil {
		return nil, nil, fmt.Errorf("listing blocks: %w", err)
	}
	jobs, err := s.store.ListJobs(ctx, team, false)
	if err != nil {
		return nil, nil, fmt.Errorf("listing jobs: %w", err)
	}
	lends := slices.ContainsFunc(blocks, func(b core.Block) bool { return b.Lending })
	if !lends && (len(jobs) == 0 || (concerns != nil && !slices.ContainsFunc(jobs, concerns))) {
		return blocks, nil, nil
	}
	var events []core.Event
	for after := int64(0); ; {
		page, err := s.store.Events(ctx, team, after, 1000)
		if err != nil {
			return nil, nil, fmt.Errorf("reading events: %w", err)
		}
		for _, e := range page {
			if strings.HasPrefix(e.Type, "job.") || e.Type == core.EventBlockLent {
				events = append(events, e)
			}
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Seq
	}
	return blocks, jobRuns(blocks, jobs, events, s.fleet), nil
}

// jobRuns turns jobs' events, in order, into their runs: a run starts at
// an event in state running (a start or a restart) and ends at the job's
// next event, or runs still. Its GPUs are the job's instances times its
// block's GPUs per instance.
func jobRuns(blocks []core.Block, jobs []core.Job, events []core.Event, fleet core.Fleet) []core.RunSpan {
	perInstance := map[string]int{}
	for _, b := range blocks {
		if t, ok := fleet.Type(b.InstanceType); ok {
			perInstance[b.ID] = t.GPUsPerInstance
		}
	}
	instances := map[string]int{}
	for _, j := range jobs {
		instances[j.ID] = j.InstanceCount
	}
	open := map[string]int{} // job → index of its running run in runs
	var runs []core.RunSpan
	for _, e := range events {
		if e.Type == core.EventBlockLent {
			if r, ok := lentRun(e); ok {
				runs = append(runs, r)
			}
			continue
		}
		n, ok := instances[e.Subject]
		if !ok {
			continue
		}
		if i, running := open[e.Subject]; running {
			runs[i].End = e.Time
			delete(open, e.Subject)
		}
		state, _ := e.Data["state"].(string)
		block, _ := e.Data["blockId"].(string)
		if state != string(core.JobRunning) || perInstance[block] == 0 {
			continue
		}
		open[e.Subject] = len(runs)
		runs = append(runs, core.RunSpan{JobID: e.Subject, BlockID: block, GPUs: n * perInstance[block], Start: e.Time})
	}
	return runs
}

func add(m map[string]*core.Utilisation, k string, u core.Utilisation) {
	if m[k] == nil {
		m[k] = &core.Utilisation{}
	}
	*m[k] = m[k].Add(u)
}

func sortedKeys(m map[string]*core.Utilisation) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// lentRun reads a block.lent event: GPUs of the block run backfill from
// to until.
func lentRun(e core.Event) (core.RunSpan, bool) {
	gpus, _ := e.Data["gpus"].(float64)
	from, err1 := time.Parse(time.RFC3339, fmt.Sprint(e.Data["from"]))
	until, err2 := time.Parse(time.RFC3339, fmt.Sprint(e.Data["until"]))
	if gpus <= 0 || err1 != nil || err2 != nil {
		return core.RunSpan{}, false
	}
	return core.RunSpan{BlockID: e.Subject, GPUs: int(gpus), Start: from, End: until, Lent: true}, true
}
