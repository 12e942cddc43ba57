package service

import (
	"context"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/store"
)

// runJobs drives jobs while this replica leads: it opens the engine's
// workloads (adopting the instances an earlier run of the server left
// running), then moves jobs on whenever blocks change, a job is created
// or an instance ends, until ctx ends or lost is closed.
func (s *Service) runJobs(ctx context.Context, lost <-chan struct{}) {
	if s.jobs == nil {
		return
	}
	ins, err := s.jobs.workloads.Open()
	if err != nil {
		s.log.Error("opening the jobs' workloads; jobs will not run", "err", err)
		return
	}
	defer ins.Close() // instances keep running; the next leader adopts them
	adopted, err := ins.Adopt()
	if err != nil {
		s.log.Error("adopting the jobs' instances", "err", err)
	} else if len(adopted) > 0 {
		s.log.Info("adopted running job instances", "count", len(adopted))
	}
	s.jobs.mu.Lock()
	s.jobs.instances = ins
	s.jobs.seen = map[string]bool{}
	s.jobs.live = map[string]int{}
	s.jobs.next = map[string]pendingRun{}
	s.jobs.holds = map[string]core.Job{}
	for _, in := range adopted {
		s.jobs.seen[in.Run] = true
		s.jobs.live[in.Run]++
	}
	s.jobs.mu.Unlock()
	s.holdAdopted(ctx, adopted)
	// The ends of instances that ended while no server watched come on
	// Exits shortly after Adopt; a run that neither runs nor ends by then
	// was lost (recorded, never started) and starts again.
	lostCheck := time.After(lostAfter)
	defer func() {
		s.jobs.mu.Lock()
		s.jobs.instances = nil
		s.jobs.mu.Unlock()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.reconcileJobs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-lost:
			return
		case x := <-ins.Exits():
			s.onExit(ctx, x)
		case <-lostCheck:
			s.restartLostJobs(ctx)
		case <-s.jobs.kick:
		case <-tick.C:
		}
	}
}

// lostAfter is how long after taking over the runner waits for the ends
// of instances that ended while no server watched, before it restarts
// the runs it found neither running nor ended.
const lostAfter = 2 * time.Second

// restartLostJobs starts again the running jobs whose current run this
// runner neither adopted nor saw end.
func (s *Service) restartLostJobs(ctx context.Context) {
	jobs, err := s.store.ListJobs(ctx, "", true)
	if err != nil {
		s.log.Error("listing open jobs", "err", err)
		return
	}
	for _, j := range jobs {
		s.jobs.mu.Lock()
		known := s.jobs.seen[runKey(j)]
		s.jobs.mu.Unlock()
		if j.State != core.JobRunning || known {
			continue
		}
		b, err := s.jobBlock(ctx, j)
		if err != nil {
			continue
		}
		now := s.clock.Now()
		next, step, ok := core.JobLost(j)
		if !ok {
			continue
		}
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("restarting a lost job", "job", j.ID, "err", err)
			continue
		}
		next.Version = j.Version + 1
		s.log.Warn("a job's run was lost (recorded, never started): starting it again", "job", j.ID)
		s.startRun(ctx, next, b)
	}
}

// reconcileJobs moves every open job on with its block's state.
func (s *Service) reconcileJobs(ctx context.Context) {
	jobs, err := s.store.ListJobs(ctx, "", true)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("listing open jobs", "err", err)
		}
		return
	}
	held := s.heldSlots(jobs)
	for _, j := range jobs {
		b, err := s.jobBlock(ctx, j)
		if err != nil {
			s.log.Error("loading the block of a job", "job", j.ID, "block", j.BlockID, "err", err)
			continue
		}
		now := s.clock.Now()
		moved := j
		if j.State != core.JobRunning && b.ID != j.BlockID {
			moved.BlockID = b.ID // a plan's job follows it to its next segment
		}
		next, step, ok := core.DecideJob(moved, b, now)
		if ok && step.Start {
			// A job's instances never share a block's GPUs with another job's.
			next, step, ok = core.TakeSlots(j, next, b.Count, held[b.ID], now)
		}
		if !ok && moved.BlockID == j.BlockID {
			continue
		}
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("moving a job on", "job", j.ID, "err", err)
			continue
		}
		next.Version = j.Version + 1
		if step.Stop {
			s.stopRun(j)
		}
		if step.Start {
			holdSlots(held, next)
			s.startAfter(ctx, j, next, b)
		}
	}
}

// heldSlots maps each block to its instance slots in use and the job
// that holds each: the slots of running jobs, and those of runs whose
// instances have not all ended yet (a stopped job's, during its grace).
func (s *Service) heldSlots(jobs []core.Job) map[string]map[int]string {
	held := map[string]map[int]string{}
	for _, j := range jobs {
		if j.State == core.JobRunning {
			holdSlots(held, j)
		}
	}
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	for _, h := range s.jobs.holds {
		holdSlots(held, h)
	}
	return held
}

// holdSlots marks the slots of j's block that j holds. A job stored
// before jobs had slots holds the first InstanceCount.
func holdSlots(held map[string]map[int]string, j core.Job) {
	slots := j.Slots
	if len(slots) == 0 {
		for i := range j.InstanceCount {
			slots = append(slots, i)
		}
	}
	if held[j.BlockID] == nil {
		held[j.BlockID] = map[int]string{}
	}
	for _, slot := range slots {
		held[j.BlockID][slot] = j.ID
	}
}

// holdAdopted records the slots held by the runs adopted from an earlier
// server, until their instances end.
func (s *Service) holdAdopted(ctx context.Context, adopted []backend.RunningInstance) {
	for _, in := range adopted {
		id, _, ok := parseRunKey(in.Run)
		if !ok {
			continue
		}
		j, err := s.store.Job(ctx, id)
		if err != nil {
			s.log.Warn("loading the job of an adopted instance", "job", id, "err", err)
			continue
		}
		s.jobs.mu.Lock()
		if s.jobs.live[in.Run] > 0 {
			s.jobs.holds[in.Run] = j
		}
		s.jobs.mu.Unlock()
	}
}

// startAfter starts the job's new run once the previous run (of prev)
// has no instance left: at once when it has none.
func (s *Service) startAfter(ctx context.Context, prev, next core.Job, b core.Block) {
	key := runKey(prev)
	s.jobs.mu.Lock()
	if s.jobs.live[key] > 0 {
		s.jobs.next[key] = pendingRun{job: next, block: b}
		s.jobs.mu.Unlock()
		return
	}
	s.jobs.mu.Unlock()
	s.startRun(ctx, next, b)
}

// onExit handles the end of one instance of a run.
func (s *Service) onExit(ctx context.Context, x backend.InstanceExit) {
	// 1. A run that was waiting for this one to end may start now.
	s.jobs.mu.Lock()
	s.jobs.seen[x.JobID] = true
	if s.jobs.live[x.JobID] > 0 {
		s.jobs.live[x.JobID]--
	}
	if s.jobs.live[x.JobID] == 0 {
		delete(s.jobs.holds, x.JobID) // its GPUs are free
	}
	pending, waiting := s.jobs.next[x.JobID]
	if waiting && s.jobs.live[x.JobID] == 0 {
		delete(s.jobs.next, x.JobID)
	} else {
		waiting = false
	}
	s.jobs.mu.Unlock()
	if waiting {
		if cur, err := s.store.Job(ctx, pending.job.ID); err == nil && cur.Run == pending.job.Run && cur.State == core.JobRunning {
			s.startRun(ctx, cur, pending.block)
		}
	}
	// 2. What the exit means for the job, recorded with it (the instances
	//    done so far too, so that another server can finish the count).
	//    A write that conflicts (a stop, a decision on the block) is
	//    decided again on the stored job.
	id, run, ok := parseRunKey(x.JobID)
	if !ok {
		return
	}
	s.log.Info("job instance exited", "job", id, "run", run, "instance", x.Instance, "code", x.Code, "signal", x.Signal)
	var j, next core.Job
	var step core.JobStep
	for attempt := 1; ; attempt++ {
		var err error
		j, err = s.store.Job(ctx, id)
		if err != nil || j.Run != run {
			return // an earlier run's exit, or a job gone
		}
		now := s.clock.Now()
		if next, step, ok = core.JobExited(j, x.Instance, x.Code, now); !ok {
			return
		}
		err = s.commitJob(ctx, j, next, step, now)
		if err == nil {
			break
		}
		if !store.IsConflict(err) || attempt == maxCommitAttempts {
			s.log.Warn("recording a job's exit", "job", id, "err", err)
			return
		}
	}
	next.Version = j.Version + 1
	if step.Stop {
		s.stopRun(j) // the rest of the ended run
	}
	if step.Start {
		b, err := s.store.GetBlock(ctx, next.BlockID)
		if err == nil && b.State == core.StateActive && !b.Terminating {
			s.startAfter(ctx, j, next, b)
		}
	}
}

// startRun starts the instances of the job's current run, each on the
// slot of the block that it is given.
func (s *Service) startRun(ctx context.Context, j core.Job, b core.Block) {
	s.jobs.mu.Lock()
	ins := s.jobs.instances
	s.jobs.mu.Unlock()
	if ins == nil {
		return
	}
	// 1. The team's user, allocated on its first job.
	user, err := s.jobUser(ctx, j.Team)
	if err != nil {
		s.log.Error("preparing a job's run", "job", j.ID, "err", err)
		for i := range j.InstanceCount {
			s.onExit(ctx, backend.InstanceExit{JobID: runKey(j), Instance: i, Code: 127, Err: err})
		}
		return
	}
	// 2. One instance per rank.
	t, _ := s.fleet.Type(b.InstanceType)
	w := backend.Workload{JobID: j.ID, Run: runKey(j), WorldSize: j.InstanceCount, Block: b, PlanID: j.PlanID,
		Slots: j.Slots, GPUsPerInstance: t.GPUsPerInstance, Command: j.Command, Env: j.Env, Restarts: j.Restarts,
		Team: j.Team, User: user, Limits: s.jobs.limits}
	s.jobs.mu.Lock()
	s.jobs.holds[w.Run] = j
	s.jobs.mu.Unlock()
	for i := range j.InstanceCount {
		w.Rank = i
		s.jobs.mu.Lock()
		s.jobs.seen[w.Run] = true
		s.jobs.live[w.Run]++
		s.jobs.mu.Unlock()
		if err := ins.Start(ctx, w); err != nil {
			s.log.Warn("starting a job instance", "job", j.ID, "instance", i, "err", err)
			s.onExit(ctx, backend.InstanceExit{JobID: w.Run, Instance: i, Code: 127, Err: err})
			return
		}
	}
}

// stopRun stops the instances of a job's run: SIGTERM, SIGKILL after the
// grace period.
func (s *Service) stopRun(j core.Job) {
	s.jobs.mu.Lock()
	ins := s.jobs.instances
	s.jobs.mu.Unlock()
	if ins == nil {
		return
	}
	for i := range j.InstanceCount {
		if err := ins.Stop(runKey(j), i, s.jobs.grace); err != nil {
			s.log.Debug("stopping a job instance", "job", j.ID, "instance", i, "err", err)
		}
	}
}
