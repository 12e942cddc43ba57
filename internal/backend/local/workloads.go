package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
	"capblock/internal/executor"
)

// Workloads runs jobs' instances as processes of this machine (the
// sim and local engines), through the executor's shim, in a jobs
// directory (see jobsdir.go for its layout):
//
//	<dir>/state/                      the executor's records, to adopt after a restart
//	<dir>/logs/<job>/instance-<n>.log each instance's log
//	<dir>/<job>/                      the job's working directory and HOME
//	<dir>/<job>/checkpoint/           CAPBLOCK_CHECKPOINT_DIR
//
// Every instance of a run is on this machine: MASTER_ADDR is 127.0.0.1,
// MASTER_PORT is the job's own (masterPort), and CUDA_VISIBLE_DEVICES
// lists the GPUs of the block's slot that the instance is given.
type Workloads struct {
	dir      string
	isolated bool
}

// NewWorkloads runs jobs in dir, made if missing. Isolated jobs run as
// users of their own (backend.Workload.User), in cgroups or not at all:
// the jobs directory then lets others pass through, and every directory
// above it must too.
func NewWorkloads(dir string, isolated bool) (*Workloads, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // jobs run in directories of their own
	}
	if err := prepareJobsDir(dir, isolated); err != nil {
		return nil, err
	}
	return &Workloads{dir: dir, isolated: isolated}, nil
}

// Open starts the executor on the jobs directory's state.
func (l *Workloads) Open() (backend.Instances, error) {
	var opts []executor.Option
	if l.isolated {
		opts = append(opts, executor.RequireCgroups()) // other users' jobs run contained, or not at all
	}
	r, err := NewProcessRunner(filepath.Join(l.dir, jobsStateDir), opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the job executor: %w", err)
	}
	return &localInstances{l: l, r: r}, nil
}

// ReadLog reads an instance's log from the jobs directory (executor.ReadLog).
func (l *Workloads) ReadLog(_ context.Context, jobID string, instance int, offset int64, limit int) ([]byte, int64, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, 0, err
	}
	data, next, err := executor.ReadLog(l.logPath(jobID, instance), offset, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, 0, nil // not started yet
	}
	if err != nil {
		return nil, 0, err
	}
	return data, next, nil
}

// workDir is a job's working directory, holding its checkpoint directory.
func (l *Workloads) workDir(jobID string) string { return filepath.Join(l.dir, jobID) }

func (l *Workloads) logPath(jobID string, instance int) string {
	return filepath.Join(l.dir, jobsLogsDir, jobID, fmt.Sprintf("instance-%d.log", instance))
}

// checkJobID refuses a job id that would name a path outside the job's
// own directories.
func checkJobID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") ||
		id == jobsStateDir || id == jobsLogsDir || id == jobsNoticesDir {
		return fmt.Errorf("job id %q cannot name a job's directory", id)
	}
	return nil
}

// localInstances is an open executor.
type localInstances struct {
	l *Workloads
	r Runner
}

var (
	_ backend.Workloads   = (*Workloads)(nil)
	_ backend.KillNoticer = (*localInstances)(nil)
)

// Runner runs the instances of jobs as processes of this machine and
// reports how they end (package executor): Workloads starts and stops
// them through it.
type Runner interface {
	// Start starts one instance; key names the job's run.
	Start(spec executor.Spec) (executor.Instance, error)
	// Stop stops an instance: SIGTERM (or its equivalent), then a kill
	// after grace. It is idempotent.
	Stop(key string, instance int, grace time.Duration) error
	// Adopt finds the instances that an earlier server started and that
	// still run; the ends of the others come on Exits.
	Adopt() ([]executor.Instance, error)
	// Exits reports each instance's end once.
	Exits() <-chan executor.Exit
	// Close lets go of the instances without stopping them.
	Close() error
}

// NewProcessRunner runs job instances as processes of this machine, with
// its state (to adopt them after a restart) in stateDir.
func NewProcessRunner(stateDir string, opts ...executor.Option) (Runner, error) {
	return executor.New(stateDir, opts...)
}

// Start prepares the job's working directory (on its first start) and
// starts the instance's process, once: a marker beside its log records
// each run's instance started, so that a start applied again (after a
// crash that came before the start was recorded done) is a no-op, even
// when the instance has ended since.
func (li *localInstances) Start(_ context.Context, w backend.Workload) error {
	if err := checkJobID(w.JobID); err != nil {
		return err
	}
	dir := li.l.workDir(w.JobID)
	if err := prepareWorkDir(dir, w.User); err != nil {
		return fmt.Errorf("preparing the directory of job %s: %w", w.JobID, err)
	}
	marker, err := li.l.markStarted(w)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("starting instance %d of job %s: %w", w.Rank, w.JobID, err)
	}
	if !w.KillAt.IsZero() {
		if err := writeKillAt(li.l.dir, w.JobID, w.KillAt, w.User); err != nil {
			_ = os.Remove(marker) // not started: a retry may start it
			return fmt.Errorf("starting instance %d of job %s: %w", w.Rank, w.JobID, err)
		}
	}
	spec := executor.Spec{JobID: w.Run, Instance: w.Rank, Command: w.Command, Env: localEnv(w, dir),
		Dir: dir, LogPath: li.l.logPath(w.JobID, w.Rank), Limits: w.Limits}
	if w.User != nil {
		spec.Credential = &executor.Credential{UID: w.User.UID, GID: w.User.GID}
	}
	if _, err := li.r.Start(spec); err != nil {
		if errors.Is(err, executor.ErrAlreadyRunning) {
			return nil
		}
		_ = os.Remove(marker) // not started: a retry may start it
		return fmt.Errorf("starting instance %d of job %s: %w", w.Rank, w.JobID, err)
	}
	return nil
}

// markStarted records that the instance of w's run is started, in the
// job's log directory; fs.ErrExist says it was already.
func (l *Workloads) markStarted(w backend.Workload) (string, error) {
	_, run, _ := strings.Cut(w.Run, "/")
	path := filepath.Join(l.dir, jobsLogsDir, w.JobID, fmt.Sprintf("instance-%d.run-%s.started", w.Rank, run))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return path, err
	}
	return path, f.Close()
}

// localEnv is the environment of a local instance whose working
// directory is dir.
func localEnv(w backend.Workload, dir string) map[string]string {
	gpus := instanceGPUs(w.Block, w.GPUsPerInstance)
	killAtFile := ""
	if !w.KillAt.IsZero() {
		killAtFile = killAtPath(filepath.Dir(dir), w.JobID)
	}
	env := executor.JobEnv(executor.EnvParams{
		BlockID: w.Block.ID, PlanID: w.PlanID, SegmentEnd: w.Block.End, CheckpointDir: filepath.Join(dir, "checkpoint"),
		RestartCount: w.Restarts, Rank: w.Rank, WorldSize: w.WorldSize, MasterAddr: "127.0.0.1", MasterPort: masterPort(w.JobID),
		GPUs: gpus[w.Slot()%len(gpus)], KillAtFile: killAtFile, User: w.Env,
	})
	env["HOME"] = dir
	return env
}

// NoticeKill rewrites the kill-at file of the run's job (see
// writeKillAt); a job never started here has none, and nothing is done.
func (li *localInstances) NoticeKill(run string, _ int, at time.Time) error {
	id, _, _ := strings.Cut(run, "/")
	if err := checkJobID(id); err != nil {
		return err
	}
	return rewriteKillAt(li.l.dir, id, at)
}

// SetDeadline moves the deadline of a running instance, where the
// runner keeps deadlines (the executor does).
func (li *localInstances) SetDeadline(run string, instance int, at time.Time) error {
	d, ok := li.r.(interface {
		SetDeadline(string, int, time.Time) error
	})
	if !ok {
		return nil
	}
	return d.SetDeadline(run, instance, at)
}

func (li *localInstances) Stop(run string, instance int, grace time.Duration) error {
	return li.r.Stop(run, instance, grace)
}

func (li *localInstances) Adopt() ([]backend.RunningInstance, error) {
	adopted, err := li.r.Adopt()
	out := make([]backend.RunningInstance, len(adopted))
	for i, in := range adopted {
		out[i] = backend.RunningInstance{Run: in.JobID, Instance: in.Instance}
	}
	return out, err
}

func (li *localInstances) Exits() <-chan backend.InstanceExit { return li.r.Exits() }

func (li *localInstances) Close() error { return li.r.Close() }

// instanceGPUs splits a block's GPUs into its instances' GPU indices, by
// slot: the placements in order, g GPUs each.
func instanceGPUs(b core.Block, g int) [][]int {
	g = max(g, 1)
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

// masterPort gives each job its own rendezvous port in 29500–30499, the
// same for every run of the job.
func masterPort(jobID string) int {
	h := 0
	for _, c := range jobID {
		h = h*31 + int(c)
	}
	return 29500 + (h%1000+1000)%1000
}
