package service

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/store"
)

// runJobs drives jobs while this replica leads: it opens the engine's
// workloads (adopting the instances an earlier run of the server left
// running), then moves jobs on whenever blocks change, a job is created
// or an instance ends, until ctx ends (the lead ends).
func (s *Service) runJobs(ctx context.Context) {
	if s.jobs == nil {
		return
	}
	ins, ok := s.openJobs(ctx)
	if !ok {
		return
	}
	defer s.closeJobs(ins) // instances keep running; the next leader adopts them
	// The instances' deadlines move on beside the loop, which they must
	// not hold up; they stop before the instances are let go.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	var renewing sync.WaitGroup
	renewing.Go(func() { s.renewDeadlinesUntil(renewCtx) })
	defer func() { stopRenewing(); renewing.Wait() }()
	// The ends of instances that ended while no server watched come on
	// Exits shortly after Adopt; a run that neither runs nor ends by then
	// was lost (recorded, never started) and starts again.
	lostCheck := time.After(lostAfter)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		s.reconcileJobs(ctx)
		select {
		case <-ctx.Done():
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

// openJobs opens the engine's workloads for a lead, adopts the instances
// an earlier server left running (holding their slots, stopping those of
// runs that ended meanwhile) and hands the outbox the runner; false when
// the workloads do not open, and jobs do not run.
func (s *Service) openJobs(ctx context.Context) (backend.Instances, bool) {
	ins, err := s.jobs.workloads.Open()
	if err != nil {
		s.log.Error("opening the jobs' workloads; jobs will not run", "err", err)
		return nil, false
	}
	adopted, err := ins.Adopt()
	if err != nil {
		s.log.Error("adopting the jobs' instances", "err", err)
	} else if len(adopted) > 0 {
		s.log.Info("adopted running job instances", "count", len(adopted))
	}
	s.jobs.mu.Lock()
	s.jobs.instances = ins
	s.jobs.seen = map[string]bool{}
	s.jobs.started = map[instanceKey]bool{}
	s.jobs.live = map[string]map[int]bool{}
	s.jobs.holds = map[string]core.Job{}
	s.jobs.deadlines = map[instanceKey]time.Time{}
	s.jobs.gpus = map[instanceKey][]gpuID{}
	for _, in := range adopted {
		s.jobs.seen[in.Run] = true
		s.jobs.started[instanceKey{in.Run, in.Instance}] = true
		s.jobs.markLive(in.Run, in.Instance)
	}
	s.jobs.mu.Unlock()
	s.holdAdopted(ctx, ins, adopted)
	s.kickOutbox() // the instances' actions that waited for the runner
	return ins, true
}

// closeJobs takes the runner from the outbox and lets the instances go,
// without stopping them.
func (s *Service) closeJobs(ins backend.Instances) {
	s.jobs.mu.Lock()
	s.jobs.instances = nil
	s.jobs.mu.Unlock()
	if err := ins.Close(); err != nil {
		s.log.Warn("letting the jobs' instances go", "err", err)
	}
}

// jobLead is the job runner of a lead driven one pass at a time
// (JobsOnce): the instances it opened, and when, on the outbox's clock,
// it looks for the runs that were lost (zero once it has).
type jobLead struct {
	ins    backend.Instances
	lostAt time.Time
}

// JobsOnce does once, synchronously, what runJobs's loop does over a
// lead: the first pass opens the workloads and adopts what runs; each
// pass then handles the instances' ends that have come, restarts the lost
// runs once lostAfter has passed on the outbox's clock since it opened,
// renews the instances' deadlines and moves every open job on. It is
// LeadOnce's (internal/simulate): nothing of it runs after it returns,
// and the workloads stay open until the service is dropped.
func (s *Service) JobsOnce(ctx context.Context) {
	if s.jobs == nil {
		return
	}
	l := s.jobs.lead
	if l == nil {
		ins, ok := s.openJobs(ctx)
		if !ok {
			return
		}
		l = &jobLead{ins: ins, lostAt: s.outbox.opts.Clock.Now().Add(lostAfter)}
		s.jobs.lead = l
	}
	s.takeExits(ctx, l.ins)
	if !l.lostAt.IsZero() && !s.outbox.opts.Clock.Now().Before(l.lostAt) {
		l.lostAt = time.Time{}
		s.restartLostJobs(ctx)
	}
	s.renewDeadlines(ctx)
	s.reconcileJobs(ctx)
}

// takeExits handles every end of an instance that has come, without
// waiting for more.
func (s *Service) takeExits(ctx context.Context, ins backend.Instances) {
	for {
		select {
		case x := <-ins.Exits():
			s.onExit(ctx, x)
		default:
			return
		}
	}
}

// recordExitsAgain records again the ends of instances whose record
// failed. Handling an end again is safe: the instance is no longer
// live, a run charged is not charged twice, and an end the stored job
// already counts, or of a run it left, changes nothing.
func (s *Service) recordExitsAgain(ctx context.Context) {
	s.jobs.mu.Lock()
	xs := s.jobs.unrecorded
	s.jobs.unrecorded = nil
	s.jobs.mu.Unlock()
	for _, x := range xs {
		s.onExit(ctx, x)
	}
}

// lostAfter is how long after taking over the runner waits for the ends
// of instances that ended while no server watched, before it restarts
// the runs it found neither running nor ended.
const lostAfter = 2 * time.Second

// restartLostJobs starts again the running jobs whose current run this
// runner neither adopted nor saw end, and whose start is not pending in
// the outbox: a run recorded before its instances' starts were actions,
// or whose instance's start was recorded by an engine that then lost it.
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
		if starting, err := s.startPending(ctx, j); err != nil || starting {
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
		s.log.Warn("a job's run was lost (recorded, never started): starting it again", "job", j.ID)
	}
}

// startPending reports whether a start of the job's current run waits in
// the outbox.
func (s *Service) startPending(ctx context.Context, j core.Job) (bool, error) {
	actions, err := s.store.ActionsFor(ctx, j.ID)
	if err != nil {
		return false, err
	}
	for _, a := range actions {
		var ref instanceRef
		if a.Kind == core.ActionStartInstance && a.State == core.ActionPending &&
			json.Unmarshal(a.Payload, &ref) == nil && ref.Run == j.Run {
			return true, nil
		}
	}
	return false, nil
}

// reconcileJobs moves every open job on with its block's state.
func (s *Service) reconcileJobs(ctx context.Context) {
	s.recordExitsAgain(ctx)
	jobs, err := s.store.ListJobs(ctx, "", true)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("listing open jobs", "err", err)
		}
		return
	}
	held := s.heldSlots(jobs)
	defer s.reconcileBackfill(ctx, jobs)
	for _, j := range jobs {
		if j.Preemptible {
			continue // reconcileBackfill's
		}
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
		if ok && step.Start && b.Lending && s.backfillOn(b.ID, jobs) {
			continue // the backfill on its GPUs is being preempted; it starts once that is gone
		}
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
		if step.Start {
			holdSlots(held, next)
		}
	}
}

// heldSlots maps each block to its instance slots in use and the job
// that holds each: the slots of running jobs, and those of runs whose
// instances have not all ended yet (a stopped job's, during its grace).
func (s *Service) heldSlots(jobs []core.Job) map[string]map[int]string {
	held := map[string]map[int]string{}
	for _, j := range jobs {
		if j.State == core.JobRunning && !j.Preemptible {
			holdSlots(held, j)
		}
	}
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	for _, h := range s.jobs.holds {
		if h.Preemptible {
			continue // on backfill, no block's slots
		}
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
// server, until their instances end, and stops the instances of runs
// that no longer should run (a stop applied while they were not
// watched, whose kill after the grace period died with that server).
func (s *Service) holdAdopted(ctx context.Context, ins backend.Instances, adopted []backend.RunningInstance) {
	for _, in := range adopted {
		id, run, ok := parseRunKey(in.Run)
		if !ok {
			continue
		}
		j, err := s.store.Job(ctx, id)
		if err != nil {
			s.log.Warn("loading the job of an adopted instance", "job", id, "err", err)
			continue
		}
		if j.Run != run || j.State != core.JobRunning {
			s.log.Info("stopping an adopted instance of a run that ended", "job", id, "run", run, "instance", in.Instance)
			if err := ins.Stop(in.Run, in.Instance, s.jobs.grace); err != nil {
				s.log.Warn("stopping an adopted instance", "job", id, "instance", in.Instance, "err", err)
			}
		}
		if ran, ok := j.UnbilledRun(); ok && ran.Run == run {
			j = ran // a stopped spot run holds the GPUs it ran on
		}
		// A run that moved on is on its job's block as far as the store
		// knows: its GPUs are held all the same, until it ends.
		gpus := s.adoptedGPUs(ctx, j, in.Instance)
		if gpus == nil {
			gpus = []gpuID{anyGPU}
		}
		s.jobs.mu.Lock()
		s.jobs.gpus[instanceKey{in.Run, in.Instance}] = gpus
		if len(s.jobs.live[in.Run]) > 0 {
			s.jobs.holds[in.Run] = j
		}
		s.jobs.mu.Unlock()
	}
}

// onExit handles the end of one instance of a run.
func (s *Service) onExit(ctx context.Context, x backend.InstanceExit) {
	// 1. Its GPUs are free once its run has no instance left, and the
	//    job's next run, waiting in the outbox, may start.
	s.jobs.mu.Lock()
	s.jobs.seen[x.JobID] = true
	s.jobs.started[instanceKey{x.JobID, x.Instance}] = true
	delete(s.jobs.live[x.JobID], x.Instance) // an end reported twice counts once
	delete(s.jobs.deadlines, instanceKey{x.JobID, x.Instance})
	delete(s.jobs.gpus, instanceKey{x.JobID, x.Instance})
	ended := len(s.jobs.live[x.JobID]) == 0
	if ended {
		delete(s.jobs.live, x.JobID)
		delete(s.jobs.holds, x.JobID)
	}
	s.jobs.mu.Unlock()
	if ended {
		s.kickOutbox()
	}
	// 2. What the exit means for the job, recorded with it (the instances
	//    done so far too, so that another server can finish the count).
	//    A write that conflicts (a stop, a decision on the block) is
	//    decided again on the stored job.
	id, run, ok := parseRunKey(x.JobID)
	if !ok {
		return
	}
	if ended {
		// 3. A stopped spot run is charged once its last instance is gone,
		//    after the exit is recorded (which may stop the run).
		defer s.chargeUnbilled(ctx, id, run)
	}
	if x.Reason != "" {
		s.log.Warn("job instance ended by its supervisor", "job", id, "run", run, "instance", x.Instance, "code", x.Code, "reason", x.Reason)
	} else {
		s.log.Info("job instance exited", "job", id, "run", run, "instance", x.Instance, "code", x.Code, "signal", x.Signal)
	}
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
			s.log.Warn("recording a job's exit; it is recorded again at the next pass", "job", id, "err", err)
			s.jobs.mu.Lock()
			s.jobs.unrecorded = append(s.jobs.unrecorded, x)
			s.jobs.mu.Unlock()
			return
		}
	}
	// The commit stored the stop of the rest of an ended run and the
	// start of the next one, as actions.
}
