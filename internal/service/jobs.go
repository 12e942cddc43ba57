package service

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// jobGrace is how long a job's instances have between SIGTERM and SIGKILL.
const jobGrace = 30 * time.Second

// jobRuntime runs jobs through the engine's Workloads. Only the replica
// that leads the reconciler runs them; any replica reads their logs.
type jobRuntime struct {
	workloads backend.Workloads
	grace     time.Duration
	kick      chan struct{}
	uids      UIDRange       // the users teams' jobs run as; zero: the server's
	limits    backend.Limits // of each instance

	mu        sync.Mutex
	instances backend.Instances // open while leading
	seen      map[string]bool   // run keys known to run or to have ended, since leading
	// started are the instances this runner started, adopted or saw end:
	// an instance's start applied again (a worker that failed to record
	// it) does not run it twice.
	started map[instanceKey]bool
	// live are each run's instances still running, by rank; a new run of
	// a job waits in the outbox until its earlier runs have none left, so
	// that a job never runs twice at once.
	live map[string]map[int]bool
	// holds are the runs with instances that may still run, by run key,
	// with the block and slots they hold.
	holds map[string]core.Job
	// teamUIDs caches the uid of each team's jobs.
	teamUIDs map[string]int
	// deadlines are the deadlines last given to the instances this
	// runner watches (jobdeadline.go), renewed every renew (0:
	// deadlineRenewEvery).
	deadlines map[instanceKey]time.Time
	// unrecorded are the instances' ends whose record failed (a store
	// that did not answer): each is recorded again at the next pass,
	// or its job would run forever with the instance gone.
	unrecorded []backend.InstanceExit
	renew      time.Duration
	// gpus are the GPUs of the instances this runner started or
	// adopted, until they end (jobgpus.go).
	gpus map[instanceKey][]gpuID
	// lead is the runner of a lead driven by JobsOnce; nil before its
	// first pass, and under runJobs.
	lead *jobLead
	// uidClaim holds this server's claim on its range of job users among
	// the servers of this machine; nil without a range.
	uidClaim *uidClaim
}

// newJobs is the job runtime of cfg: its Workloads, else processes of
// this machine in its JobsDir; nil when the server runs no jobs. With a
// range of job users, it first claims the range among the servers of
// this machine (claimUIDRange), for the database whose offering secret
// is secret: two servers of different databases would give different
// teams the same users.
func newJobs(cfg Config, secret []byte) (*jobRuntime, error) {
	w := cfg.Workloads
	if w == nil && cfg.JobsDir == "" {
		return nil, nil
	}
	var claim *uidClaim
	if !cfg.JobUIDs.IsZero() {
		registry := cfg.JobUIDRegistry
		if registry == "" {
			registry = DefaultUIDRegistry
		}
		var err error
		if claim, err = claimUIDRange(registry, cfg.JobUIDs, databaseOwner(secret)); err != nil {
			return nil, err
		}
	}
	if w == nil {
		lw, err := local.NewWorkloads(cfg.JobsDir, !cfg.JobUIDs.IsZero())
		if err != nil {
			if claim != nil {
				_ = claim.release()
			}
			return nil, err
		}
		w = lw
	}
	return &jobRuntime{workloads: w, grace: jobGrace, kick: make(chan struct{}, 1), uids: cfg.JobUIDs, limits: cfg.JobLimits,
		seen: map[string]bool{}, started: map[instanceKey]bool{}, live: map[string]map[int]bool{}, holds: map[string]core.Job{},
		teamUIDs: map[string]int{}, deadlines: map[instanceKey]time.Time{}, gpus: map[instanceKey][]gpuID{}, uidClaim: claim}, nil
}

func (r *jobRuntime) renewEvery() time.Duration {
	if r.renew > 0 {
		return r.renew
	}
	return deadlineRenewEvery
}

// runKey names one run of a job to the engine: "<job id>/<run>".
func runKey(j core.Job) string { return j.ID + "/" + strconv.Itoa(j.Run) }

func parseRunKey(key string) (string, int, bool) {
	id, run, ok := strings.Cut(key, "/")
	n, err := strconv.Atoi(run)
	return id, n, ok && err == nil
}

func (s *Service) kickJobs() {
	if s.jobs == nil {
		return
	}
	select {
	case s.jobs.kick <- struct{}{}:
	default:
	}
}

// CreateJob records a job on one of the team's blocks; it starts when
// the block is active.
func (s *Service) CreateJob(ctx context.Context, scope string, req contract.JobRequest) (core.Job, error) {
	if s.jobs == nil {
		return core.Job{}, s.jobsOffError()
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return core.Job{}, core.Invalidf("command is required: the program and its arguments, e.g. [\"python\", \"train.py\"]")
	}
	if req.Preemptible {
		return s.createBackfillJob(ctx, scope, req)
	}
	if req.InstanceType != "" || req.Zone != "" {
		return core.Job{}, core.Invalidf("instanceType and zone are for preemptible jobs; a job on a block runs on the block's instances")
	}
	var b core.Block
	switch {
	case (req.BlockID == "") == (req.PlanID == ""):
		return core.Job{}, core.Invalidf("give exactly one of blockId and planId: the capacity the job runs on")
	case req.PlanID != "":
		p, err := s.GetPlan(ctx, scope, req.PlanID)
		if err != nil {
			return core.Job{}, err
		}
		seg, ok := jobSegment(p.Plan)
		if !ok {
			return core.Job{}, core.Invalidf("plan %s has no segments", req.PlanID)
		}
		b = seg
	default:
		var err error
		if b, err = s.GetBlock(ctx, scope, req.BlockID); err != nil {
			return core.Job{}, err
		}
	}
	if err := checkJobRequest(req); err != nil {
		return core.Job{}, err
	}
	if !b.State.Live() {
		if req.PlanID != "" {
			return core.Job{}, fmt.Errorf("%w: plan %s has no segment to come (its last, block %s, is %s)", core.ErrInvalidState, req.PlanID, b.ID, b.State)
		}
		return core.Job{}, fmt.Errorf("%w: block %s is %s: a job needs a block that is scheduled or active", core.ErrInvalidState, b.ID, b.State)
	}
	n := req.InstanceCount
	if n == 0 {
		n = b.Count
	}
	if n < 1 || n > b.Count {
		return core.Job{}, core.Invalidf("instanceCount %d: block %s has %d instances", n, b.ID, b.Count)
	}
	if req.MaxRestarts < 0 || req.MaxRestarts > 100 {
		return core.Job{}, core.Invalidf("maxRestarts %d: want 0 to 100", req.MaxRestarts)
	}
	now := s.clock.Now()
	j := core.Job{ID: newID("job"), Name: req.Name, Team: b.Team, BlockID: b.ID, PlanID: req.PlanID, Command: req.Command, Env: req.Env,
		InstanceCount: n, MaxRestarts: req.MaxRestarts, State: core.JobPending, CreatedAt: now}
	c := store.Change{Jobs: []store.JobWrite{{Job: j}}, Events: []core.Event{s.jobEvent(now, core.EventJobPending, j, "")}}
	if err := s.store.Commit(ctx, c); err != nil {
		return core.Job{}, fmt.Errorf("storing job %s: %w", j.ID, err)
	}
	s.notifyEvents()
	s.kickJobs()
	j.Version = 1
	return j, nil
}

// checkJobRequest refuses, when the job is created rather than when it
// starts, what no process could be started with: a NUL byte in the
// command or the environment, or an environment variable name that a
// process environment cannot hold; and a name that is not printable.
func checkJobRequest(req contract.JobRequest) error {
	if err := core.CheckPrintable("name", req.Name); err != nil {
		return err
	}
	for i, arg := range req.Command {
		if strings.ContainsRune(arg, 0) {
			return core.Invalidf("command[%d] contains a NUL byte, which no program argument can hold", i)
		}
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return core.Invalidf("environment variable name %q is not valid: it must be non-empty, without '=' or NUL", k)
		}
		if strings.ContainsRune(v, 0) {
			return core.Invalidf("environment variable %s contains a NUL byte, which no environment can hold", k)
		}
	}
	return nil
}

// ListJobs returns the jobs in scope.
func (s *Service) ListJobs(ctx context.Context, scope string) ([]core.Job, error) {
	js, err := s.store.ListJobs(ctx, scope, false)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return js, nil
}

// GetJob returns a job in scope; another team's is not found.
func (s *Service) GetJob(ctx context.Context, scope, id string) (core.Job, error) {
	j, err := s.store.Job(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && scope != "" && j.Team != scope) {
		return core.Job{}, fmt.Errorf("%w: job %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Job{}, fmt.Errorf("loading job %s: %w", id, err)
	}
	return j, nil
}

// StopJob stops a job: its instances get SIGTERM, then SIGKILL.
func (s *Service) StopJob(ctx context.Context, scope, id string) (core.Job, error) {
	j, err := s.GetJob(ctx, scope, id)
	if err != nil {
		return core.Job{}, err
	}
	now := s.clock.Now()
	next, step, err := core.StopJob(j, now)
	if err != nil {
		return core.Job{}, err
	}
	if err := s.commitJob(ctx, j, next, step, now); err != nil {
		return core.Job{}, err
	}
	next.Version = j.Version + 1
	return next, nil
}

// JobLogs returns up to limit bytes of an instance's log from offset (a
// negative offset counts from the end), and the offset to read next.
func (s *Service) JobLogs(ctx context.Context, scope, id string, instance int, offset int64, limit int) ([]byte, int64, error) {
	j, err := s.GetJob(ctx, scope, id)
	if err != nil {
		return nil, 0, err
	}
	if s.jobs == nil {
		return nil, 0, s.jobsOffError()
	}
	if instance < 0 || instance >= j.InstanceCount {
		return nil, 0, core.Invalidf("instance %d: job %s has instances 0 to %d", instance, id, j.InstanceCount-1)
	}
	data, next, err := s.jobs.workloads.ReadLog(ctx, j.ID, instance, offset, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of job %s: %w", id, err)
	}
	return data, next, nil
}

// jobSegment is the segment of a plan that its jobs are on: the active
// one, else the next to come, else the last.
func jobSegment(p core.Plan) (core.Block, bool) {
	if len(p.Segments) == 0 {
		return core.Block{}, false
	}
	core.SortSegments(p.Segments)
	if i := core.CurrentSegment(p.Segments); i >= 0 {
		return p.Segments[i], true
	}
	return p.Segments[len(p.Segments)-1], true
}

// jobBlock is the block a job should be on now: its block, or its plan's
// current segment.
func (s *Service) jobBlock(ctx context.Context, j core.Job) (core.Block, error) {
	if j.PlanID == "" {
		return s.store.GetBlock(ctx, j.BlockID)
	}
	p, err := s.store.Plan(ctx, j.PlanID)
	if err != nil {
		return core.Block{}, err
	}
	b, ok := jobSegment(p)
	if !ok {
		return core.Block{}, fmt.Errorf("plan %s has no segments", j.PlanID)
	}
	return b, nil
}

func (s *Service) jobEvent(at time.Time, typ string, j core.Job, reason string) core.Event {
	data := map[string]any{"blockId": j.BlockID, "state": string(j.State), "restarts": j.Restarts}
	if j.PlanID != "" {
		data["planId"] = j.PlanID
	}
	if j.Preemptible {
		data["preemptible"] = true
		data["instanceType"] = j.InstanceType
	}
	if reason != "" {
		data["reason"] = reason
	}
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: j.ID, Team: j.Team, Data: data}
}

// commitJob stores a job's new state with its event and the starts and
// stops of instances that its step calls for (jobActions), checking the
// version it was decided on.
func (s *Service) commitJob(ctx context.Context, was, next core.Job, step core.JobStep, now time.Time) error {
	if next.Preemptible && step.Start {
		next.RunStartedAt = now
	}
	// A stopped spot run is charged when its last instance is gone
	// (chargeUnbilled), not at its SIGTERM; its instances are told when
	// they are killed.
	var killAt time.Time
	if was.Preemptible && step.Stop {
		killAt = now.Add(s.stopGrace(step))
	}
	next, deferred := core.DeferSpotCharge(was, next, step, killAt)
	c := store.Change{Jobs: []store.JobWrite{{Job: next, ExpectedVersion: was.Version}}, Actions: s.jobActions(was, next, step, killAt)}
	if step.Event != "" {
		c.Events = []core.Event{s.jobEvent(now, step.Event, next, step.Reason)}
	}
	if core.BackfillRunEnds(was, next, step) && !deferred {
		var evs []core.Event
		c.Journals, evs = s.spotEntries(ctx, was, now)
		c.Events = append(c.Events, evs...)
	}
	if err := s.store.Commit(ctx, c); err != nil {
		return fmt.Errorf("storing job %s: %w", next.ID, err)
	}
	if len(c.Events) > 0 {
		s.notifyEvents()
	}
	if len(c.Actions) > 0 {
		s.kickOutbox()
	}
	return nil
}

// stopGrace is how long the instances a step stops have from SIGTERM to
// the kill: the step's grace, else the runner's.
func (s *Service) stopGrace(step core.JobStep) time.Duration {
	if step.Grace > 0 {
		return step.Grace
	}
	if s.jobs != nil {
		return s.jobs.grace
	}
	return jobGrace
}

// markLive records an instance of a run as running. Callers hold mu.
func (r *jobRuntime) markLive(run string, instance int) {
	if r.live[run] == nil {
		r.live[run] = map[int]bool{}
	}
	r.live[run][instance] = true
}
