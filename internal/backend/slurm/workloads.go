package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"capblock/internal/backend"
	"capblock/internal/executor"
)

// Defaults of JobsConfig.
const (
	// DefaultMasterPort is rank 0's rendezvous port (MASTER_PORT).
	DefaultMasterPort = 29500
	// DefaultJobPoll is how often an open Workloads asks squeue how its
	// runs' jobs stand.
	DefaultJobPoll = 5 * time.Second
)

// JobsConfig is how capblock's jobs run on the cluster (Workloads).
type JobsConfig struct {
	// Dir is the jobs' directory, at the same path on capblock's host
	// and on every node (a shared file system): their working and
	// checkpoint directories, their output files, and capblock's record
	// of the runs it submitted. Required.
	Dir string
	// MasterPort is rank 0's rendezvous port. Default DefaultMasterPort.
	MasterPort int
	// Poll is how often the runs' jobs are read. Default DefaultJobPoll.
	Poll time.Duration
}

// Workloads runs capblock's jobs on the cluster: each run of a job is
// one batch job in its block's reservation, with one task per instance
// (instances.go), run as the team's first Slurm user. It is
// backend.Workloads.
//
// The jobs' directory:
//
//	<dir>/runs/<job>/run-<n>          the Slurm job id of run n, once submitted (capblock's)
//	<dir>/runs/<job>/run-<n>.ended-<r> instance r's end, reported (capblock's)
//	<dir>/logs/<job>/instance-<r>.log instance r's output, every run appended (the user's)
//	<dir>/logs/<job>/run-<n>.exit-<r> how instance r of run n exited (written by its task)
//	<dir>/logs/<job>/run-<n>.batch.log the batch script's own output
//	<dir>/<job>/                      the job's working directory and HOME (the user's)
//	<dir>/<job>/checkpoint/           CAPBLOCK_CHECKPOINT_DIR
//
// capblock makes the job's folders owned by the team's Slurm user, so
// that Slurm's steps, run as that user, write there; runs/ and logs/
// stay capblock's, so that no job can move what capblock reads.
type Workloads struct {
	be     *Backend
	cfg    JobsConfig
	sbatch string
}

var _ backend.Workloads = (*Workloads)(nil)

// Folders of the jobs' directory.
const (
	runsDir = "runs"
	logsDir = "logs"
)

// NewWorkloads runs jobs through be's commands, in cfg.Dir (made if
// missing).
func NewWorkloads(be *Backend, cfg JobsConfig) (*Workloads, error) {
	if cfg.Dir == "" {
		return nil, errors.New("jobs on Slurm need a directory that capblock's host and the nodes share (--slurm-job-dir)")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("jobs directory %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	if cfg.MasterPort == 0 {
		cfg.MasterPort = DefaultMasterPort
	}
	if cfg.MasterPort < 1 || cfg.MasterPort > 65535 {
		return nil, fmt.Errorf("master port %d: want 1 to 65535", cfg.MasterPort)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultJobPoll
	}
	sbatch := "sbatch"
	if be.cfg.Bin != "" {
		sbatch = filepath.Join(be.cfg.Bin, sbatch)
	}
	if sbatch, err = exec.LookPath(sbatch); err != nil {
		return nil, fmt.Errorf("finding Slurm's sbatch (install Slurm's client commands, or give their folder with --slurm-bin): %w", err)
	}
	// runs/ is capblock's alone; the teams' users pass through logs/
	// to their jobs' folders, whatever capblock's umask.
	for _, d := range []string{dir, filepath.Join(dir, runsDir), filepath.Join(dir, logsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("making the jobs directory: %w", err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, logsDir), 0o755); err != nil {
		return nil, fmt.Errorf("making the jobs directory: %w", err)
	}
	if err := backend.CheckJobsDirReachable(filepath.Join(dir, logsDir, "job")); err != nil {
		return nil, err
	}
	return &Workloads{be: be, cfg: cfg, sbatch: sbatch}, nil
}

// Open starts watching the runs' jobs (instances.go).
func (wl *Workloads) Open() (backend.Instances, error) { return openInstances(wl) }

// ReadLog reads an instance's output file, which every run of the job
// appends to. The file is the job's user's, in a folder of its own: it
// is read through that folder only, so that a link the job put there
// leads nowhere outside it.
func (wl *Workloads) ReadLog(_ context.Context, jobID string, instance int, offset int64, limit int) ([]byte, int64, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, 0, err
	}
	root, err := os.OpenRoot(wl.logDir(jobID))
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of instance %d of job %s: %w", instance, jobID, err)
	}
	defer root.Close()
	f, err := root.OpenFile(logName(instance), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of instance %d of job %s: %w", instance, jobID, err)
	}
	defer f.Close()
	data, next, err := readFrom(f, offset, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the log of instance %d of job %s: %w", instance, jobID, err)
	}
	return data, next, nil
}

// readFrom reads up to limit bytes of f from offset (from the end when
// negative) and returns the offset to read next.
func readFrom(f *os.File, offset int64, limit int) ([]byte, int64, error) {
	if limit <= 0 {
		limit = 64 << 10
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, errors.New("not a regular file")
	}
	size := fi.Size()
	if offset < 0 {
		offset = max(size+offset, 0)
	}
	if offset >= size {
		return []byte{}, offset, nil
	}
	buf := make([]byte, min(int64(limit), size-offset))
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	return buf[:n], offset + int64(n), nil
}

func (wl *Workloads) logDir(jobID string) string  { return filepath.Join(wl.cfg.Dir, logsDir, jobID) }
func (wl *Workloads) runDir(jobID string) string  { return filepath.Join(wl.cfg.Dir, runsDir, jobID) }
func (wl *Workloads) workDir(jobID string) string { return filepath.Join(wl.cfg.Dir, jobID) }

func logName(instance int) string { return fmt.Sprintf("instance-%d.log", instance) }

// checkJobID refuses a job id that would name a path outside the job's
// own folders, or that Slurm's job name could not carry.
func checkJobID(id string) error {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00,' \n") || id == runsDir || id == logsDir {
		return fmt.Errorf("job id %q cannot name a job's directory", id)
	}
	return nil
}

// splitRun reads a run key, "<job id>/<run>".
func splitRun(run string) (jobID string, n int, err error) {
	jobID, num, ok := strings.Cut(run, "/")
	n, aerr := strconv.Atoi(num)
	if !ok || aerr != nil || n < 0 {
		return "", 0, fmt.Errorf("run %q is not <job>/<number>", run)
	}
	return jobID, n, checkJobID(jobID)
}

// slurmUser is who the team's jobs run as on the cluster: its first
// Slurm user in the fleet file's slurm section, and its first account
// if it has one. A team the section lacks runs none: its reservations
// are held for the hold users, who are not the team.
func (wl *Workloads) slurmUser(ctx context.Context, team string) (*user.User, string, error) {
	a, ok := wl.be.cfg.Teams[team]
	if !ok && wl.be.cfg.TeamName != nil {
		name, err := wl.be.cfg.TeamName(ctx, team)
		if err != nil {
			return nil, "", fmt.Errorf("finding the name of team %s: %w", team, err)
		}
		a, ok = wl.be.cfg.Teams[name]
	}
	if !ok || len(a.Users) == 0 {
		return nil, "", fmt.Errorf("%w: team %s has no Slurm user in the fleet file's slurm section, to run its jobs as", backend.ErrPermanent, team)
	}
	u, err := user.Lookup(a.Users[0])
	if err != nil {
		return nil, "", fmt.Errorf("%w: Slurm user %s of team %s is not a user of capblock's host: %v", backend.ErrPermanent, a.Users[0], team, err)
	}
	account := ""
	if len(a.Accounts) > 0 {
		account = a.Accounts[0]
	}
	return u, account, nil
}

// ids are a user's numeric ids.
type ids struct {
	uid, gid uint32
	groups   []uint32
}

func userIDs(u *user.User) (ids, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return ids{}, fmt.Errorf("user %s: %w", u.Username, err)
	}
	out := ids{uid: uint32(uid), gid: uint32(gid)}
	if gs, err := u.GroupIds(); err == nil {
		for _, g := range gs {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				out.groups = append(out.groups, uint32(n))
			}
		}
	}
	return out, nil
}

// prepareDirs makes the job's folders, owned by its Slurm user: its
// working and checkpoint directories and its logs' folder. A folder
// made already is left as it is.
func (wl *Workloads) prepareDirs(jobID string, owner ids) error {
	for _, d := range []string{wl.workDir(jobID), filepath.Join(wl.workDir(jobID), "checkpoint"), wl.logDir(jobID)} {
		err := os.Mkdir(d, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(d, int(owner.uid), int(owner.gid)); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(wl.runDir(jobID), 0o755)
}

// env is the environment sbatch runs in, which the batch job takes
// whole (--export=ALL) and its tasks after it: the user's variables,
// the environment contract, and what Slurm's commands need. Nothing of
// capblock's own environment goes with it. RANK, WORLD_SIZE,
// MASTER_ADDR and CUDA_VISIBLE_DEVICES are set in the job, from Slurm's.
// The user's SBATCH_*, SALLOC_* and SRUN_* variables are left out: they
// would change how the job is submitted.
func (wl *Workloads) env(w backend.Workload) []string {
	vars := executor.JobEnv(executor.EnvParams{BlockID: w.Block.ID, PlanID: w.PlanID, SegmentEnd: w.Block.End,
		CheckpointDir: filepath.Join(wl.workDir(w.JobID), "checkpoint"), RestartCount: w.Restarts, WorldSize: w.WorldSize,
		MasterPort: wl.cfg.MasterPort, User: w.Env})
	for _, k := range []string{"RANK", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES"} {
		delete(vars, k)
	}
	vars["HOME"] = wl.workDir(w.JobID)
	for _, k := range []string{"PATH", "LANG"} {
		if _, set := vars[k]; !set {
			if v, ok := os.LookupEnv(k); ok {
				vars[k] = v
			}
		}
	}
	if _, set := vars["PATH"]; !set {
		vars["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	out := make([]string, 0, len(vars)+2)
	for k, v := range vars {
		if strings.HasPrefix(k, "SBATCH_") || strings.HasPrefix(k, "SALLOC_") || strings.HasPrefix(k, "SRUN_") ||
			k == "SLURM_CONF" || k == "TZ" || k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			continue
		}
		out = append(out, k+"="+v)
	}
	// The commands' own: the cluster's slurm.conf, and UTC.
	for _, kv := range wl.be.env {
		if strings.HasPrefix(kv, "SLURM_CONF=") || strings.HasPrefix(kv, "TZ=") {
			out = append(out, kv)
		}
	}
	return out
}
