package backend

import (
	"context"
	"slices"
	"strings"
	"time"

	"capblock/internal/core"
	"capblock/internal/executor"
)

// Workloads runs the instances of jobs on the GPUs of their blocks, the
// engine's way, and reads their logs back. The service decides which run
// of a job runs, on which block and slots, and when it stops; the engine
// decides how an instance finds its peers (MASTER_ADDR, MASTER_PORT),
// which devices it sees (CUDA_VISIBLE_DEVICES), where its working and
// checkpoint directories and its log live, and sets the environment
// contract of the README (CAPBLOCK_*, RANK, WORLD_SIZE): the local engine
// runs processes of this machine (package local); Kubernetes would run
// pods, Slurm batch jobs.
type Workloads interface {
	// Open starts carrying instances, on the replica that leads. One
	// Instances is open at a time; Close lets it go.
	Open() (Instances, error)
	// ReadLog reads up to limit bytes of an instance's log from offset,
	// and returns the offset to read next. Offsets count everything the
	// instance printed, whatever a log's cap dropped since; a negative
	// offset counts from the end. A log not written yet reads as empty,
	// at offset 0. Any replica may read, leading or not.
	ReadLog(ctx context.Context, jobID string, instance int, offset int64, limit int) ([]byte, int64, error)
}

// Instances starts and stops the instances of jobs' runs and reports how
// they end, while open.
type Instances interface {
	// Start starts one instance of a run. It returns once the instance
	// runs; its end comes on Exits.
	Start(ctx context.Context, w Workload) error
	// Stop stops an instance of a run: SIGTERM (or the engine's
	// equivalent), then a kill after grace. It is idempotent.
	Stop(run string, instance int, grace time.Duration) error
	// Adopt finds the instances that an earlier server started and that
	// still run; the ends of the others come on Exits.
	Adopt() ([]RunningInstance, error)
	// Exits reports each instance's end once.
	Exits() <-chan InstanceExit
	// Close lets go of the instances without stopping them: the next
	// leader adopts them.
	Close() error
}

// KillNoticer is Instances that can tell an instance, beyond SIGTERM,
// when it will be killed: the local engine keeps the time in a file the
// instance reads (CAPBLOCK_KILL_AT_FILE).
type KillNoticer interface {
	// NoticeKill tells an instance of a run (started with a KillAt) that
	// it will be killed at at.
	NoticeKill(run string, instance int, at time.Time) error
}

// Deadliner is Instances whose instances end by themselves at a deadline
// on the wall clock (Limits.Deadline), even with no server: the local
// engine's shims. The service moves the deadline while it lives (an
// extension, or a lease on a simulated clock).
type Deadliner interface {
	// SetDeadline moves the deadline of an instance of a run; an instance
	// that does not run is not an error.
	SetDeadline(run string, instance int, at time.Time) error
}

// Workload is one instance of a job's run, described without the engine:
// what the service decided and stores.
type Workload struct {
	JobID string
	// Run names the job's run ("<job id>/<run>"); the engine names the
	// instance's process, pod or batch job after it, so that a new server
	// finds it again, and reports it on the instance's exit.
	Run string
	// Rank is the instance's rank in the run, 0 to WorldSize-1.
	Rank, WorldSize int
	// Block is the block (or plan segment) the run is on, with its
	// placements; its End is the segment's end. PlanID is the job's plan.
	Block  core.Block
	PlanID string
	// Slots are the block's instance slots the job holds, by rank; a job
	// stored before jobs had slots holds the first WorldSize (Slots is
	// empty). GPUsPerInstance is the block's instance type's.
	Slots           []int
	GPUsPerInstance int
	// Command is the program and its arguments; Env is the user's
	// environment, under capblock's variables.
	Command []string
	Env     map[string]string
	// Restarts is how many times the job was restarted.
	Restarts int
	Team     string
	// User is the user and group the team's jobs run as on this machine,
	// allocated by the service (and stored, so that replicas agree); nil
	// runs them as the server's user. Only the local engine uses it.
	User *User
	// Limits bound the instance.
	Limits Limits
	// KillAt, for a preemptible run, is the earliest moment its instances
	// may be killed as known at the start (a block needing its GPUs, its
	// team's budget running out); the engine tells the instance when it
	// moves (KillNoticer). Zero for a job on a block.
	KillAt time.Time
}

// Slot is the block's instance slot that the workload is given.
func (w Workload) Slot() int {
	if w.Rank < len(w.Slots) {
		return w.Slots[w.Rank]
	}
	return w.Rank
}

// SlotGPUs are the GPUs of slot of block b on their node, perInstance of
// them: the placements in order, split perInstance GPUs a slot, as the
// engines give them to instances. ok is false for a slot the block does
// not have.
func SlotGPUs(b core.Block, perInstance, slot int) (node string, gpus []int, ok bool) {
	g := max(perInstance, 1)
	for _, pl := range b.Placements {
		for i := 0; i+g <= len(pl.GPUs); i += g {
			if slot == 0 {
				return pl.Node, pl.GPUs[i : i+g], true
			}
			slot--
		}
	}
	return "", nil, false
}

// User is a numeric user and group.
type User struct {
	UID, GID uint32
}

// Limits bound one instance; a zero field is no limit (see
// executor.Limits, whose memory, process and log limits the local engine
// applies).
type Limits = executor.Limits

// RunningInstance is an instance that runs.
type RunningInstance struct {
	Run      string
	Instance int
}

// SortRunning orders running instances by run, then instance: Adopt's
// order, the same at every call.
func SortRunning(rs []RunningInstance) {
	slices.SortFunc(rs, func(a, b RunningInstance) int {
		if a.Run != b.Run {
			return strings.Compare(a.Run, b.Run)
		}
		return a.Instance - b.Instance
	})
}

// InstanceExit reports how an instance ended: JobID is the run
// (Workload.Run), Instance its rank, Code the exit status the way a shell
// reports it (128+n for a process killed by signal n, which Signal names;
// -1 when it is unknown), Err what went wrong starting or watching it.
//
// It is the executor's Exit, so that the local engine hands out the
// executor's own channel: the executor forgets an exit once it is
// received, and a copy taken in between would lose the exit in flight
// when the leader stops reading, which the next leader would otherwise
// find in the executor's state.
type InstanceExit = executor.Exit
