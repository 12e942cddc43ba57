package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"capblock/internal/backend"
)

// instances is an open Workloads: the runs it watches, by run key, and a
// poller that reads their jobs from squeue every Poll and sends each
// instance's end on Exits once. Runs whose ends were not all reported
// (by this server or an earlier one) are found again in the runs
// folder at Open.
type instances struct {
	wl     *Workloads
	exits  chan backend.InstanceExit
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
	once   sync.Once

	mu       sync.Mutex
	runs     map[string]*watched // by run key
	starting sync.Map            // run key → *sync.Mutex, one Start of a run at a time
	starts   *backend.Starts
}

// watched is a run whose job was submitted.
type watched struct {
	jobID    string // capblock's
	n        int    // the run's number
	slurmID  string
	size     int          // its instances
	ended    map[int]bool // instances whose end was reported
	stopping bool         // signalled by this server's Stop
}

func openInstances(wl *Workloads) (*instances, error) {
	ctx, cancel := context.WithCancel(context.Background())
	in := &instances{wl: wl, exits: make(chan backend.InstanceExit), ctx: ctx, cancel: cancel,
		runs: map[string]*watched{}, starts: backend.NewStarts()}
	if err := in.load(); err != nil {
		cancel()
		return nil, err
	}
	in.done.Go(in.poll)
	return in, nil
}

// load finds the runs submitted whose ends were not all reported.
func (in *instances) load() error {
	jobs, err := os.ReadDir(filepath.Join(in.wl.cfg.Dir, runsDir))
	if err != nil {
		return fmt.Errorf("reading the runs of capblock's jobs: %w", err)
	}
	for _, j := range jobs {
		files, err := os.ReadDir(in.wl.runDir(j.Name()))
		if err != nil || checkJobID(j.Name()) != nil {
			continue
		}
		for _, f := range files {
			num, ok := strings.CutPrefix(f.Name(), "run-")
			if n, err := strconv.Atoi(num); ok && err == nil {
				if w, err := in.wl.readRun(j.Name(), n); err == nil && len(w.ended) < w.size {
					in.runs[j.Name()+"/"+num] = w
				}
			}
		}
	}
	return nil
}

// runFile records run n's Slurm job: "<slurm id> <instances>".
func (wl *Workloads) runFile(jobID string, n int) string {
	return filepath.Join(wl.runDir(jobID), fmt.Sprintf("run-%d", n))
}

func (wl *Workloads) readRun(jobID string, n int) (*watched, error) {
	b, err := os.ReadFile(wl.runFile(jobID, n))
	if err != nil {
		return nil, err
	}
	var w watched
	if _, err := fmt.Sscanf(string(b), "%s %d", &w.slurmID, &w.size); err != nil {
		return nil, fmt.Errorf("reading %s: %w", wl.runFile(jobID, n), err)
	}
	w.jobID, w.n, w.ended = jobID, n, map[int]bool{}
	for r := range w.size {
		if _, err := os.Stat(fmt.Sprintf("%s.ended-%d", wl.runFile(jobID, n), r)); err == nil {
			w.ended[r] = true
		}
	}
	return &w, nil
}

// Start submits the run's batch job, unless it is submitted already: the
// job runs every instance of the run, so the first Start of any of its
// ranks submits it and the others find it. A run is found by its record
// in the runs folder, else (a server stopped between sbatch and the
// record) by its job's name in squeue, so that a Start applied again
// never submits twice.
func (in *instances) Start(ctx context.Context, w backend.Workload) error {
	if err := in.start(ctx, w); err != nil {
		return err
	}
	in.starts.Start(w.Run, w.Rank)
	return nil
}

func (in *instances) start(ctx context.Context, w backend.Workload) error {
	jobID, n, err := splitRun(w.Run)
	if err != nil {
		return err
	}
	lock, _ := in.starting.LoadOrStore(w.Run, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	in.mu.Lock()
	_, known := in.runs[w.Run]
	in.mu.Unlock()
	if known {
		return nil
	}
	if run, err := in.wl.readRun(jobID, n); err == nil {
		in.watch(w.Run, run)
		return nil
	}
	// 1. Who runs it, in which folders.
	u, account, err := in.wl.slurmUser(ctx, w.Team)
	if err != nil {
		return err
	}
	owner, err := userIDs(u)
	if err != nil {
		return err
	}
	if err := in.wl.prepareDirs(jobID, owner); err != nil {
		return fmt.Errorf("preparing the directories of job %s: %w", jobID, err)
	}
	// 2. Submit, unless submitted before a crash and not recorded. A
	// failure Slurm may mend (a controller out of reach, or busy) is
	// tried again a few times, looking for the job first, since sbatch
	// may have failed after the controller took it: an error here ends
	// the instance.
	var slurmID string
	for attempt := 1; ; attempt++ {
		slurmID, err = in.findJob(ctx, w.Run)
		if err == nil && slurmID == "" {
			slurmID, err = in.submit(ctx, w, account, owner, u.Username)
		}
		if err == nil || errors.Is(err, backend.ErrPermanent) || attempt == submitAttempts {
			break
		}
		in.wl.be.log.Warn("submitting a job's run; trying again", "run", w.Run, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
	if err != nil {
		return err
	}
	run := &watched{jobID: jobID, n: n, slurmID: slurmID, size: w.WorldSize, ended: map[int]bool{}}
	if err := os.WriteFile(in.wl.runFile(jobID, n), fmt.Appendf(nil, "%s %d\n", slurmID, w.WorldSize), 0o644); err != nil {
		return fmt.Errorf("recording Slurm job %s of run %s: %w", slurmID, w.Run, err)
	}
	in.watch(w.Run, run)
	return nil
}

// submitAttempts bounds the tries of one Start's submission.
const submitAttempts = 3

func (in *instances) watch(run string, w *watched) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.runs[run]; !ok {
		in.runs[run] = w
	}
}

// findJob is the Slurm job of run that squeue still lists, or "".
func (in *instances) findJob(ctx context.Context, run string) (string, error) {
	out, err := in.wl.be.run(ctx, "squeue", "--noheader", "--all", "--states=all", "--name="+run, "--format=%A|%j|%k")
	if err != nil {
		return "", fmt.Errorf("looking for the Slurm job of run %s: %w", run, err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) == 3 && f[1] == run && f[2] == jobComment {
			return f[0], nil
		}
	}
	return "", nil
}

// submit runs sbatch as the team's Slurm user, the batch script on its
// standard input, and returns the job's id.
func (in *instances) submit(ctx context.Context, w backend.Workload, account string, owner ids, userName string) (string, error) {
	if euid := os.Geteuid(); euid != 0 && uint32(euid) != owner.uid {
		return "", fmt.Errorf("%w: capblock runs as uid %d, and only root may submit a job as Slurm user %s of team %s: run capblock as root, or map the team to capblock's own user", backend.ErrPermanent, euid, userName, w.Team)
	}
	args := in.wl.sbatchArgs(w, account, in.wl.be.cfg.Now())
	cmd := exec.CommandContext(ctx, in.wl.sbatch, args...)
	cmd.Env = in.wl.env(w)
	cmd.Dir = in.wl.workDir(w.JobID)
	cmd.Stdin = strings.NewReader(in.wl.batchScript(w))
	if uint32(os.Geteuid()) != owner.uid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: owner.uid, Gid: owner.gid, Groups: owner.groups}}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		ce := &commandError{command: "sbatch " + strings.Join(args, " "), stderr: strings.TrimSpace(stderr.String()), err: err}
		if slurmSays(ce, "Invalid account") || slurmSays(ce, "Invalid user") || slurmSays(ce, "Access denied") {
			return "", fmt.Errorf("%w: submitting run %s as %s: %w", backend.ErrPermanent, w.Run, userName, ce)
		}
		return "", fmt.Errorf("submitting run %s as %s: %w", w.Run, userName, ce)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(stdout.String()), ";") // "<id>;<cluster>" on a federation
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("submitting run %s: sbatch printed %q, not a job id", w.Run, stdout.String())
	}
	in.wl.be.log.Info("submitted a job's run to its block's reservation", "job", w.JobID, "run", w.Run, "slurmJob", id,
		"reservation", w.Block.ID, "instances", w.WorldSize, "user", userName)
	return id, nil
}

// Stop stops the run that the instance is part of: Slurm runs a run as
// one job, so stopping any of its instances stops them all. A pending
// job is cancelled; a running one gets SIGTERM (every process of its
// tasks) and its end brought forward to now + grace, so that Slurm ends
// it then even if capblock stops meanwhile; this server also cancels it
// after the grace. A run that is not submitted, or has ended, has
// nothing to stop.
func (in *instances) Stop(run string, instance int, grace time.Duration) error {
	in.starts.Stop(run, instance)
	in.mu.Lock()
	w, ok := in.runs[run]
	stopping := ok && w.stopping
	in.mu.Unlock()
	if !ok {
		jobID, n, err := splitRun(run)
		if err != nil {
			return err
		}
		if w, err = in.wl.readRun(jobID, n); err != nil {
			return nil // never submitted
		}
		in.watch(run, w)
	}
	if stopping {
		return nil
	}
	ctx, cancel := context.WithTimeout(in.ctx, 30*time.Second)
	defer cancel()
	jobs, err := in.wl.be.run(ctx, "squeue", "--noheader", "--all", "--states=all", "--jobs="+w.slurmID, "--format=%A|%T|%e")
	if err != nil && !ended(err) {
		return fmt.Errorf("stopping run %s: %w", run, err)
	}
	list := parseJobs(jobs)
	if len(list) == 0 || !active(list[0].state) {
		return nil
	}
	deadline := in.wl.be.cfg.Now().Add(grace).UTC().Truncate(time.Second)
	switch {
	case list[0].state == "PENDING":
		err = in.wl.be.scancel(ctx, w.slurmID)
	case !list[0].end.IsZero() && !list[0].end.After(deadline):
		// signalled already, by an earlier server
	default:
		err = in.wl.be.scancel(ctx, "--signal=TERM", w.slurmID)
		if err == nil {
			_, err = in.wl.be.run(ctx, "scontrol", "update", "JobId="+w.slurmID, "EndTime="+deadline.Format(slurmTime))
			if ended(err) { // ended on the SIGTERM
				err = nil
			}
		}
		if err == nil {
			in.done.Go(func() { in.killAfter(w.slurmID, grace) })
		}
	}
	if err != nil {
		return fmt.Errorf("stopping run %s (Slurm job %s): %w", run, w.slurmID, err)
	}
	in.mu.Lock()
	w.stopping = true
	in.mu.Unlock()
	in.wl.be.log.Info("stopping a job's run", "run", run, "slurmJob", w.slurmID, "grace", grace)
	return nil
}

// killAfter cancels Slurm job id after grace, unless the instances
// close first (Slurm's own end of the job then comes at its EndTime).
func (in *instances) killAfter(id string, grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-in.ctx.Done():
	case <-t.C:
		ctx, cancel := context.WithTimeout(in.ctx, 30*time.Second)
		defer cancel()
		_ = in.wl.be.scancel(ctx, id)
	}
}

// Adopt reports the instances of the watched runs whose jobs are pending
// or running and that have not exited; the ends of the others come on
// Exits.
func (in *instances) Adopt() ([]backend.RunningInstance, error) {
	states, err := in.states(in.ctx)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []backend.RunningInstance
	for run, w := range in.runs {
		if !active(states[w.slurmID]) {
			continue
		}
		for r := range w.size {
			if _, ok := in.wl.taskExit(w, r); !ok && !w.ended[r] {
				out = append(out, backend.RunningInstance{Run: run, Instance: r})
				in.starts.Adopt(run, r)
			}
		}
	}
	backend.SortRunning(out)
	return out, nil
}

// Exits reports each instance's end once (see poll).
func (in *instances) Exits() <-chan backend.InstanceExit { return in.exits }

// Close stops the poller and leaves the jobs as they are: the next Open
// adopts those that run and reports the others' ends.
func (in *instances) Close() error {
	in.once.Do(func() {
		in.cancel()
		in.done.Wait()
	})
	return nil
}
