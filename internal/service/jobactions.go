package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Jobs' instances start and stop through the outbox, as blocks activate
// and release: a decision that starts a run or stops one stores a
// start-instance or stop-instance action per instance in the commit that
// records the job's new state, and the outbox worker of the leading
// replica applies them through the engine's Workloads. A job's actions
// have the job as their subject, so that they apply in the order they
// were decided: a run's stops before the next run's starts. A crash
// between a job's commit and its instances' start or stop loses nothing;
// a stop decided on a replica that does not lead stops the instances all
// the same.
//
// A start waits (errWaiting) while instances of the job's earlier runs
// still run, so that a job never runs twice at once, and is dropped as
// done when the decision it carried no longer holds when it applies (the
// job moved on to another run, was stopped, or its block is no longer
// usable): the job's stored state, not the action, says what should run.

// instanceRef is the payload of a start-instance or stop-instance action:
// which instance of which run of which job. The rest (the command, the
// block, the team's user) is read when it applies.
type instanceRef struct {
	Job      string `json:"job"`
	Run      int    `json:"run"`
	Instance int    `json:"instance"`
	// GraceMS, for a stop, is the time from SIGTERM to the kill, in
	// milliseconds; zero is the runner's own (a preemption's is shorter:
	// its instances are gone before the GPUs are needed).
	GraceMS int64 `json:"graceMs,omitempty"`
	// KillAtMS, for a stop of a preemptible run, is when the stop decided
	// its instances are killed (Unix milliseconds), told to the instance
	// where the engine can (backend.KillNoticer).
	KillAtMS int64 `json:"killAtMs,omitempty"`
}

func (r instanceRef) runKey() string { return runKey(core.Job{ID: r.Job, Run: r.Run}) }

// jobActions are the engine actions of a job's decision from was to next
// (stored at was.Version+1): a stop of each instance of was's run when
// the step stops it (killed at killAt, when not zero), then a start of
// each instance of next's run when the step starts one.
func (s *Service) jobActions(was, next core.Job, step core.JobStep, killAt time.Time) []core.Action {
	var out []core.Action
	add := func(kind core.ActionKind, j core.Job) {
		for i := range j.InstanceCount {
			ref := instanceRef{Job: j.ID, Run: j.Run, Instance: i}
			if kind == core.ActionStopInstance {
				ref.GraceMS = step.Grace.Milliseconds()
				if !killAt.IsZero() {
					ref.KillAtMS = killAt.UnixMilli()
				}
			}
			payload, err := json.Marshal(ref)
			if err != nil {
				panic(fmt.Sprintf("encoding an instance's action: %v", err)) // strings and numbers always encode
			}
			now := s.outbox.opts.Clock.Now()
			out = append(out, core.Action{ID: fmt.Sprintf("ac-%s-%d-%s-%d", j.ID, was.Version+1, kind, i), Kind: kind,
				Subject: j.ID, Team: j.Team, Payload: payload, NextAt: now, CreatedAt: now})
		}
	}
	if step.Stop {
		add(core.ActionStopInstance, was)
	}
	if step.Start {
		add(core.ActionStartInstance, next)
	}
	return out
}

// errWaiting is an action that cannot apply yet, for a reason that is no
// failure (a job's earlier run still ends, the job runner is not open
// yet): the worker tries it again at its next pass without counting an
// attempt, and shows the reason in the status meanwhile.
type errWaiting struct{ why string }

func (e errWaiting) Error() string { return e.why }

func waiting(format string, args ...any) error { return errWaiting{why: fmt.Sprintf(format, args...)} }

// applyAction applies one action of the outbox: a block's through the
// backend, an instance's through the job runner.
func (s *Service) applyAction(ctx context.Context, a core.Action) (err error) {
	ctx, end := traced(ctx, "engine."+string(a.Kind), trace.SpanKindClient,
		attribute.String("capblock.action", a.ID), attribute.String("capblock.action.subject", a.Subject))
	defer end(&err)
	switch a.Kind {
	case core.ActionStartInstance, core.ActionStopInstance:
		return s.applyInstanceAction(ctx, a)
	}
	if s.backend == nil {
		return waiting("this server has no engine backend")
	}
	return backend.Apply(ctx, s.backend, a)
}

// applyInstanceAction starts or stops one instance of a job's run, on the
// replica that leads (where the job runner is open).
func (s *Service) applyInstanceAction(ctx context.Context, a core.Action) error {
	var ref instanceRef
	if err := json.Unmarshal(a.Payload, &ref); err != nil || ref.Job != a.Subject {
		return fmt.Errorf("%w: action %s names no instance of job %s", backend.ErrPermanent, a.ID, a.Subject)
	}
	if s.jobs == nil {
		return waiting("this server runs no jobs (serve --jobs-dir)")
	}
	s.jobs.mu.Lock()
	ins := s.jobs.instances
	s.jobs.mu.Unlock()
	if ins == nil {
		return waiting("the job runner is not open yet")
	}
	if a.Kind == core.ActionStopInstance {
		grace := s.jobs.grace
		if ref.GraceMS > 0 {
			grace = time.Duration(ref.GraceMS) * time.Millisecond
		}
		if n, ok := ins.(backend.KillNoticer); ok && ref.KillAtMS > 0 {
			// Told before SIGTERM, so that a job reads it when that comes.
			if err := n.NoticeKill(ref.runKey(), ref.Instance, time.UnixMilli(ref.KillAtMS).UTC()); err != nil {
				s.log.Warn("telling a job instance when it is killed", "job", ref.Job, "instance", ref.Instance, "err", err)
			}
		}
		if err := ins.Stop(ref.runKey(), ref.Instance, grace); err != nil {
			return fmt.Errorf("stopping instance %d of job %s: %w", ref.Instance, ref.Job, err)
		}
		return nil
	}
	return s.startInstance(ctx, ins, ref)
}

// startInstance starts one instance of a job's run, if the job's stored
// state still wants it to run, once the job's earlier runs have ended.
func (s *Service) startInstance(ctx context.Context, ins backend.Instances, ref instanceRef) error {
	// 1. Does the decision still hold?
	j, err := s.store.Job(ctx, ref.Job)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading job %s: %w", ref.Job, err)
	}
	if j.Run != ref.Run || j.State != core.JobRunning || slices.Contains(j.Done, ref.Instance) || ref.Instance >= j.InstanceCount {
		s.log.Debug("a job instance's start no longer holds", "job", j.ID, "run", ref.Run, "instance", ref.Instance, "state", j.State, "current run", j.Run)
		return nil
	}
	var b core.Block
	slots := j.Slots
	if j.Preemptible {
		// On backfill: instance i on the GPUs of its allocation.
		if len(j.Backfill) != j.InstanceCount {
			return nil
		}
		b = s.backfillBlock(j)
		if !s.clock.Now().Before(b.End) {
			// Its window closed before the start came (a slow commit, a
			// late pass): the GPUs are another block's now, and the
			// job's own decision preempts the run.
			return nil
		}
		slots = nil
		for i := range j.InstanceCount {
			slots = append(slots, i)
		}
	} else {
		b, err = s.store.GetBlock(ctx, j.BlockID)
		if err != nil {
			return fmt.Errorf("loading block %s of job %s: %w", j.BlockID, j.ID, err)
		}
		if b.State != core.StateActive || b.Terminating || !s.clock.Now().Before(b.End) {
			// The job's own decision follows its block: one whose end
			// came before its expiry was stored is over all the same.
			return nil
		}
	}
	// 2. A job never runs twice at once: its earlier runs end first.
	key := ref.runKey()
	s.jobs.mu.Lock()
	if s.jobs.started[instanceKey{key, ref.Instance}] {
		s.jobs.mu.Unlock()
		return nil // started by this runner, and maybe ended since
	}
	for run, live := range s.jobs.live {
		if id, r, ok := parseRunKey(run); ok && id == j.ID && r < ref.Run && len(live) > 0 {
			n := len(live)
			s.jobs.mu.Unlock()
			return waiting("waiting for %d instance(s) of run %d of job %s to end", n, r, j.ID)
		}
	}
	// Nor on a GPU that another run's instance still has (jobgpus.go).
	t, _ := s.fleet.Type(b.InstanceType)
	gpus := slotGPUs(b, t.GPUsPerInstance, slotOf(slots, ref.Instance))
	if busy := s.jobs.gpuBusy(key, gpus); busy != "" {
		s.jobs.mu.Unlock()
		return waiting("%s", busy)
	}
	s.jobs.mu.Unlock()
	// 3. The team's user, allocated on its first job.
	user, err := s.jobUser(ctx, j.Team)
	if err != nil {
		return fmt.Errorf("preparing a run of job %s: %w", j.ID, err)
	}
	// 4. Start it; its slots are held until it ends.
	w := backend.Workload{JobID: j.ID, Run: key, Rank: ref.Instance, WorldSize: j.InstanceCount, Block: b, PlanID: j.PlanID,
		Slots: slots, GPUsPerInstance: t.GPUsPerInstance, Command: j.Command, Env: j.Env, Restarts: j.Restarts,
		Team: j.Team, User: user, Limits: s.jobs.limits}
	if j.Preemptible {
		w.KillAt = b.End
	}
	// It never outlives its block, even without this server.
	w.Limits.Deadline, w.Limits.StopGrace = s.wallDeadline(b.End), s.jobs.grace
	s.jobs.mu.Lock()
	s.jobs.deadlines[instanceKey{key, ref.Instance}] = w.Limits.Deadline
	s.jobs.started[instanceKey{key, ref.Instance}] = true
	s.jobs.gpus[instanceKey{key, ref.Instance}] = gpus
	s.jobs.seen[key] = true
	s.jobs.markLive(key, ref.Instance)
	s.jobs.holds[key] = j
	s.jobs.mu.Unlock()
	if err := ins.Start(ctx, w); err != nil {
		// The engine could not run it: the instance ends at once, as a
		// command that cannot start does, and the job decides what
		// follows (a restart, or a failure).
		s.log.Warn("starting a job instance", "job", j.ID, "run", ref.Run, "instance", ref.Instance, "err", err)
		s.onExit(ctx, backend.InstanceExit{JobID: key, Instance: ref.Instance, Code: 127, Err: err})
	}
	return nil
}

// instanceNeverStarted ends, as a command that cannot start, the instance
// whose start action a was given up on, so that its job moves on (a
// restart, or a failure) rather than wait for it forever.
func (s *Service) instanceNeverStarted(ctx context.Context, a core.Action, why error) {
	var ref instanceRef
	if a.Kind != core.ActionStartInstance || s.jobs == nil || json.Unmarshal(a.Payload, &ref) != nil {
		return
	}
	s.onExit(ctx, backend.InstanceExit{JobID: ref.runKey(), Instance: ref.Instance, Code: 127, Err: why})
}

// slotOf is the slot of instance i of a run that holds slots (the first
// ones, when it holds none: a job stored before jobs had slots).
func slotOf(slots []int, i int) int {
	if i < len(slots) {
		return slots[i]
	}
	return i
}

// instanceKey names one instance of a run.
type instanceKey struct {
	run      string
	instance int
}
