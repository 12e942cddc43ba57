package core

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// JobState is a job's lifecycle state.
type JobState string

const (
	JobPending     JobState = "pending"
	JobRunning     JobState = "running"
	JobInterrupted JobState = "interrupted"
	JobSucceeded   JobState = "succeeded"
	JobFailed      JobState = "failed"
	JobStopped     JobState = "stopped"
)

// Final reports whether a job in this state will never run again.
func (s JobState) Final() bool {
	return s == JobSucceeded || s == JobFailed || s == JobStopped
}

// Job event types.
const (
	EventJobPending     = "job.pending"
	EventJobRunning     = "job.running"
	EventJobRestarted   = "job.restarted"
	EventJobInterrupted = "job.interrupted"
	EventJobSucceeded   = "job.succeeded"
	EventJobFailed      = "job.failed"
	EventJobStopped     = "job.stopped"
)

// Reasons a job failed or waits.
const (
	ReasonInsufficientCapacity = "insufficient_capacity"
	ReasonCapacityEnded        = "capacity_ended"
	ReasonExitCode             = "exit_code"
	ReasonStoppedByUser        = "stopped_by_user"
)

// MaxPending is how long a job waits for its capacity before it fails.
const MaxPending = 48 * time.Hour

// Job is a command run on a block's GPUs, one process per instance.
type Job struct {
	ID   string
	Name string
	Team string
	// BlockID is the block the job runs on; for a job on a plan, the
	// plan's current segment, which changes as the plan moves on.
	BlockID       string
	PlanID        string
	Command       []string
	Env           map[string]string
	InstanceCount int
	MaxRestarts   int
	State         JobState
	Restarts      int
	Reason        string
	CreatedAt     time.Time
	StartedAt     time.Time
	EndedAt       time.Time
	// Run counts the job's starts; each start's processes carry it, so
	// that the exit of an earlier run is never taken for the current one.
	Run int
	// Done are the instances of the current run that exited with code 0,
	// stored so that whichever server sees the last exit knows the run
	// succeeded (a restart or another replica's lead in between).
	Done []int
	// Slots are the instances of the block that the job's instances run
	// on (its instance i on slot Slots[i]), chosen by TakeSlots when it
	// starts on a block, so that two jobs never share a block's GPUs.
	Slots []int
	// Preemptible jobs run on backfill (see backfill.go), on no block:
	// InstanceCount instances of InstanceType, in Zone ("" for any).
	// Backfill are the GPUs of the current run, one allocation per
	// instance, none while the job waits; RunStartedAt is when the run
	// started, what its spot price is charged from.
	Preemptible  bool
	InstanceType string
	Zone         string
	Backfill     []BackfillAlloc
	RunStartedAt time.Time
	// Unbilled is a preemptible job's run that was stopped and whose
	// instances may still run: it is charged when its last instance is
	// gone, not when it was told to stop, and the job does not run again
	// before.
	Unbilled *SpotRun
	Version  int64
}

// JobStep is what the controller must do after a decision.
type JobStep struct {
	Event string
	Start bool // start the job's instances (a new run)
	Stop  bool // stop the running instances
	// Grace, for a stop, is the time from SIGTERM to the kill; zero is
	// the runner's own.
	Grace  time.Duration
	Reason string
}

// DecideJob moves a job on with its block's state at now: a pending job
// starts when its block is active and not yet terminating, and fails
// after MaxPending or when the block ends first; a running job is stopped
// and interrupted when its block starts terminating, and an interrupted
// one fails when the block has ended (or runs again if it was extended). It returns the job and the step, or ok false when nothing
// is due.
func DecideJob(j Job, b Block, now time.Time) (Job, JobStep, bool) {
	switch j.State {
	case JobPending, JobInterrupted:
		switch {
		case b.State == StateActive && !b.Terminating:
			// Its block is usable: first start, or (an extended block) again.
			j.State, j.Run, j.Done = JobRunning, j.Run+1, nil
			if j.StartedAt.IsZero() {
				j.StartedAt = now
			}
			return j, JobStep{Event: EventJobRunning, Start: true}, true
		case !b.State.Live() || (j.State == JobPending && b.Terminating):
			j.State, j.Reason, j.EndedAt = JobFailed, ReasonCapacityEnded, now
			return j, JobStep{Event: EventJobFailed, Reason: ReasonCapacityEnded}, true
		case j.State == JobPending && now.Sub(j.CreatedAt) >= MaxPending:
			j.State, j.Reason, j.EndedAt = JobFailed, ReasonInsufficientCapacity, now
			return j, JobStep{Event: EventJobFailed, Reason: ReasonInsufficientCapacity}, true
		}
	case JobRunning:
		if b.State != StateActive || b.Terminating {
			j.State, j.Reason = JobInterrupted, ReasonCapacityEnded
			return j, JobStep{Event: EventJobInterrupted, Stop: true, Reason: ReasonCapacityEnded}, true
		}
	}
	return j, JobStep{}, false
}

// JobExited decides what the exit of one instance of a running job's
// current run means: every instance done with code 0 is success, and
// fewer are recorded in Done to wait for the others; a non-zero exit is
// restarted while restarts remain, else the job fails. An exit of an
// interrupted or stopped job, or one already recorded, changes nothing.
func JobExited(j Job, instance, code int, now time.Time) (Job, JobStep, bool) {
	if j.State != JobRunning {
		return j, JobStep{}, false
	}
	switch {
	case code == 0 && slices.Contains(j.Done, instance):
		return j, JobStep{}, false // seen before (an exit file read again)
	case code == 0 && len(j.Done)+1 >= j.InstanceCount:
		j.State, j.EndedAt, j.Reason, j.Done = JobSucceeded, now, "", nil
		return j, JobStep{Event: EventJobSucceeded}, true
	case code == 0:
		j.Done = append(slices.Clone(j.Done), instance)
		slices.Sort(j.Done)
		return j, JobStep{}, true // stored; wait for the other instances
	case j.Restarts < j.MaxRestarts:
		j.Restarts++
		j.Run, j.Done = j.Run+1, nil
		return j, JobStep{Event: EventJobRestarted, Stop: true, Start: true, Reason: fmt.Sprintf("exit code %d", code)}, true
	default:
		j.State, j.EndedAt, j.Reason = JobFailed, now, fmt.Sprintf("%s %d", ReasonExitCode, code)
		return j, JobStep{Event: EventJobFailed, Stop: true, Reason: j.Reason}, true
	}
}

// StopJob is a user's stop: a job not yet final becomes stopped.
func StopJob(j Job, now time.Time) (Job, JobStep, error) {
	if j.State.Final() {
		return j, JobStep{}, fmt.Errorf("%w: job %s is already %s", ErrInvalidState, j.ID, j.State)
	}
	stop := j.State == JobRunning
	j.State, j.Reason, j.EndedAt = JobStopped, ReasonStoppedByUser, now
	return j, JobStep{Event: EventJobStopped, Stop: stop, Reason: ReasonStoppedByUser}, nil
}

// ReasonNodeFailed is why a job restarts on replacement GPUs.
const ReasonNodeFailed = "node_failed"

// JobCapacityMoved restarts a running job whose block got replacement
// GPUs after a node failure: a new run, from its checkpoint directory,
// that does not count against MaxRestarts (the job did not fail).
func JobCapacityMoved(j Job, node string) (Job, JobStep, bool) {
	if j.State != JobRunning {
		return j, JobStep{}, false
	}
	j.Run, j.Done = j.Run+1, nil
	return j, JobStep{Event: EventJobRestarted, Stop: true, Start: true, Reason: ReasonNodeFailed + ": " + node}, true
}

// ReasonLost is why a job restarts when the server finds its run gone.
const ReasonLost = "lost"

// JobLost restarts a running job whose run the server cannot find after a
// restart (it crashed between recording the run and starting it): a new
// run, from its checkpoint directory, not counted against MaxRestarts.
func JobLost(j Job) (Job, JobStep, bool) {
	if j.State != JobRunning {
		return j, JobStep{}, false
	}
	j.Run, j.Done = j.Run+1, nil
	return j, JobStep{Event: EventJobRestarted, Start: true, Reason: ReasonLost}, true
}

// ReasonWaitingForGPUs is why a job on an active block waits: other jobs
// of the team hold the block's instances it needs.
const ReasonWaitingForGPUs = "waiting_for_gpus"

// TakeSlots gives a job that is about to start (next, decided by
// DecideJob from was) the block's instance slots it runs on: the lowest
// free ones of a block with count instances, where held maps each slot in
// use to the job that holds it. A job's instances never share GPUs with
// another job's, so when too few are free the job keeps waiting in its
// state (was), with a reason naming a holder; ok is then true only when
// that reason is new (to be stored without an event), and a pending job
// that has waited MaxPending fails as when no capacity came. Slots are
// kept across restarts on the same block.
func TakeSlots(was, next Job, count int, held map[int]string, now time.Time) (Job, JobStep, bool) {
	free := make([]int, 0, next.InstanceCount)
	holder := ""
	for slot := 0; slot < count && len(free) < next.InstanceCount; slot++ {
		if h, ok := held[slot]; ok && h != next.ID {
			if holder == "" {
				holder = h
			}
			continue
		}
		free = append(free, slot)
	}
	if len(free) == next.InstanceCount {
		next.Slots = free
		if next.Reason == ReasonWaitingForGPUs || strings.HasPrefix(next.Reason, ReasonWaitingForGPUs+":") {
			next.Reason = ""
		}
		return next, JobStep{Event: EventJobRunning, Start: true}, true
	}
	if was.State == JobPending && now.Sub(was.CreatedAt) >= MaxPending {
		was.State, was.Reason, was.EndedAt = JobFailed, ReasonInsufficientCapacity, now
		return was, JobStep{Event: EventJobFailed, Reason: ReasonInsufficientCapacity}, true
	}
	reason := fmt.Sprintf("%s: it needs %d instances of block %s and %d are free (job %s holds the others)", ReasonWaitingForGPUs,
		next.InstanceCount, next.BlockID, len(free), holder)
	if was.Reason == reason && was.BlockID == next.BlockID {
		return was, JobStep{}, false
	}
	was.Reason, was.BlockID = reason, next.BlockID
	return was, JobStep{}, true
}
