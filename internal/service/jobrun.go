package service

import (
	"context"
	"path/filepath"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/executor"
	"capblock/internal/store"
)

// runJobs drives jobs while this replica leads: it starts an executor on
// the jobs directory (adopting the processes an earlier run of the server
// left running), then moves jobs on whenever blocks change, a job is
// created or a process ends, until ctx ends or lost is closed.
func (s *Service) runJobs(ctx context.Context, lost <-chan struct{}) {
	if s.jobs == nil {
		return
	}
	var opts []executor.Option
	if !s.jobs.uids.IsZero() {
		opts = append(opts, executor.RequireCgroups()) // other users' jobs run contained, or not at all
	}
	ex, err := backend.NewProcessRunner(filepath.Join(s.jobs.dir, jobsStateDir), opts...)
	if err != nil {
		s.log.Error("starting the job executor; jobs will not run", "err", err)
		return
	}
	defer ex.Close() // processes keep running; the next leader adopts them
	adopted, err := ex.Adopt()
	if err != nil {
		s.log.Error("adopting the jobs' processes", "err", err)
	} else if len(adopted) > 0 {
		s.log.Info("adopted running job processes", "count", len(adopted))
	}
	s.jobs.mu.Lock()
	s.jobs.exec = ex
	s.jobs.seen = map[string]bool{}
	s.jobs.live = map[string]int{}
	s.jobs.next = map[string]pendingRun{}
	s.jobs.holds = map[string]core.Job{}
	for _, in := range adopted {
		s.jobs.seen[in.JobID] = true
		s.jobs.live[in.JobID]++
	}
	s.jobs.mu.Unlock()
	s.holdAdopted(ctx, adopted)
	// The ends of processes that ended while no server watched come on
	// Exits shortly after Adopt; a run that neither runs nor ends by then
	// was lost (recorded, never started) and starts again.
	lostCheck := time.After(lostAfter)
	defer func() {
		s.jobs.mu.Lock()
		s.jobs.exec = nil
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
		case x := <-ex.Exits():
			s.onExit(ctx, x)
		case <-lostCheck:
			s.restartLostJobs(ctx)
		case <-s.jobs.kick:
		case <-tick.C:
		}
	}
}

// lostAfter is how long after taking over the runner waits for the ends
// of processes that ended while no server watched, before it restarts
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
// processes have not all ended yet (a stopped job's, during its grace).
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
// server, until their processes end.
func (s *Service) holdAdopted(ctx context.Context, adopted []executor.Instance) {
	for _, in := range adopted {
		id, _, ok := parseRunKey(in.JobID)
		if !ok {
			continue
		}
		j, err := s.store.Job(ctx, id)
		if err != nil {
			s.log.Warn("loading the job of an adopted process", "job", id, "err", err)
			continue
		}
		s.jobs.mu.Lock()
		if s.jobs.live[in.JobID] > 0 {
			s.jobs.holds[in.JobID] = j
		}
		s.jobs.mu.Unlock()
	}
}

// startAfter starts the job's new run once the previous run (of prev)
// has no process left: at once when it has none.
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
func (s *Service) onExit(ctx context.Context, x executor.Exit) {
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

// startRun starts one process per instance of the job's current run, on
// the GPUs of the block that the instance is given.
func (s *Service) startRun(ctx context.Context, j core.Job, b core.Block) {
	s.jobs.mu.Lock()
	ex := s.jobs.exec
	s.jobs.mu.Unlock()
	if ex == nil {
		return
	}
	// 1. The team's user, and the job's directory, made on its first run.
	user, err := s.jobUser(ctx, j.Team)
	dir := s.jobWorkDir(j.ID)
	if err == nil {
		err = prepareWorkDir(dir, user)
	}
	if err != nil {
		s.log.Error("preparing a job's run", "job", j.ID, "err", err)
		for i := range j.InstanceCount {
			s.onExit(ctx, executor.Exit{JobID: runKey(j), Instance: i, Code: 127, Err: err})
		}
		return
	}
	checkpoint := filepath.Join(dir, "checkpoint")
	// 2. One process per instance.
	gpus := s.instanceGPUs(b)
	s.jobs.mu.Lock()
	s.jobs.holds[runKey(j)] = j
	s.jobs.mu.Unlock()
	for i := range j.InstanceCount {
		slot := i
		if i < len(j.Slots) {
			slot = j.Slots[i]
		}
		env := executor.JobEnv(executor.EnvParams{
			BlockID: b.ID, PlanID: j.PlanID, SegmentEnd: b.End, CheckpointDir: checkpoint, RestartCount: j.Restarts,
			Rank: i, WorldSize: j.InstanceCount, MasterAddr: "127.0.0.1", MasterPort: masterPort(j),
			GPUs: gpus[slot%len(gpus)], User: j.Env,
		})
		env["HOME"] = dir
		spec := executor.Spec{JobID: runKey(j), Instance: i, Command: j.Command, Env: env,
			Dir: dir, LogPath: s.jobLogPath(j.ID, i), Credential: user, Limits: s.jobs.limits}
		s.jobs.mu.Lock()
		s.jobs.seen[spec.JobID] = true
		s.jobs.live[spec.JobID]++
		s.jobs.mu.Unlock()
		if _, err := ex.Start(spec); err != nil {
			s.log.Warn("starting a job instance", "job", j.ID, "instance", i, "err", err)
			s.onExit(ctx, executor.Exit{JobID: spec.JobID, Instance: i, Code: 127, Err: err})
			return
		}
	}
}

// stopRun stops the processes of a job's run: SIGTERM, SIGKILL after the
// grace period.
func (s *Service) stopRun(j core.Job) {
	s.jobs.mu.Lock()
	ex := s.jobs.exec
	s.jobs.mu.Unlock()
	if ex == nil {
		return
	}
	for i := range j.InstanceCount {
		if err := ex.Stop(runKey(j), i, s.jobs.grace); err != nil {
			s.log.Debug("stopping a job instance", "job", j.ID, "instance", i, "err", err)
		}
	}
}

// instanceGPUs splits a block's GPUs into its instances' GPU indices.
func (s *Service) instanceGPUs(b core.Block) [][]int {
	t, _ := s.fleet.Type(b.InstanceType)
	g := max(t.GPUsPerInstance, 1)
	var out [][]int
	for _, pl := range b.Placements {
		for i := 0; i+g <= len(pl.GPUs); i += g {
			out = append(out, pl.GPUs[i:i+g])
		}
	}
	if len(out) == 0 {
		out = [][]int{nil}
	}
	return out
}

// masterPort gives each job its own rendezvous port in 29500–30499.
func masterPort(j core.Job) int {
	h := 0
	for _, c := range j.ID {
		h = h*31 + int(c)
	}
	return 29500 + (h%1000+1000)%1000
}
