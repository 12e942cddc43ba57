package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// record is the state file of one run of an instance, <run>.json in the
// state directory. The shim writes it once the command runs; it lives until
// the run's exit is handed over.
type record struct {
	RunID    string `json:"run_id"`
	JobID    string `json:"job_id"`
	Instance int    `json:"instance"`
	// PID and StartTicks are the shim's: the run goes on while it runs.
	// (Records of earlier versions name a /bin/sh wrapper here.)
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	// PGID is the command's process group, which the command leads;
	// LeaderTicks is the command's start time. It is 0 in records of
	// earlier versions, whose group the wrapper led.
	PGID        int    `json:"pgid"`
	LeaderTicks uint64 `json:"leader_start_ticks,omitempty"`
	// Cgroups are the run's cgroup directories, of CgroupVersion.
	CgroupVersion int      `json:"cgroup_version,omitempty"`
	Cgroups       []string `json:"cgroups,omitempty"`
	// BootID tells a record of an earlier boot, whose processes are gone
	// whatever pid now has the same number and start time.
	BootID    string    `json:"boot_id"`
	StartedAt time.Time `json:"started_at"`
	LogPath   string    `json:"log_path"`
}

func (r record) cgroups() runCgroups {
	return runCgroups{Version: r.CgroupVersion, Dirs: r.Cgroups}
}

// leader returns the start time of the process that leads the run's group.
func (r record) leader() uint64 {
	if r.LeaderTicks == 0 {
		return r.StartTicks
	}
	return r.LeaderTicks
}

func (e *Executor) recordPath(runID string) string {
	return filepath.Join(e.stateDir, runID+".json")
}

func (e *Executor) exitPath(runID string) string {
	return filepath.Join(e.stateDir, runID+".exit")
}

// writeRecord writes a run's record to stateDir whole or not at all, by
// renaming a complete file into place.
func writeRecord(stateDir string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding state record: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(stateDir, r.RunID+".json"), b); err != nil {
		return fmt.Errorf("writing state record: %w", err)
	}
	return nil
}

// writeExit records how a run's command ended, for the executor to read
// once the shim has exited: its status, then a line for an OOM kill, one
// for why the shim ended it (reason, when it did) and one per problem met
// while supervising it.
func writeExit(stateDir, runID string, status int, oomKilled bool, reason string, problem error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", status)
	if oomKilled {
		b.WriteString("oom-killed\n")
	}
	if reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", strings.ReplaceAll(reason, "\n", " "))
	}
	if problem != nil {
		for _, line := range strings.Split(problem.Error(), "\n") {
			fmt.Fprintf(&b, "error: %s\n", line)
		}
	}
	_ = writeFileAtomic(filepath.Join(stateDir, runID+".exit"), []byte(b.String()))
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (e *Executor) removeRecord(runID string) {
	for _, path := range []string{e.recordPath(runID), e.exitPath(runID), e.deadlinePath(runID)} {
		_ = os.Remove(path)
		_ = os.Remove(path + ".tmp")
	}
}

// Adopt takes over the instances recorded in the state directory by an
// earlier Executor, typically one in a server that crashed, and returns those
// that still run; they are watched as if started here and can be stopped.
// Each recorded instance that ended in the meantime is reported on Exits,
// with its status when its shim recorded one, once whatever its shim left
// behind is gone. Instances this Executor already watches are skipped, so
// Adopt may be called again. Unreadable records are removed and reported in
// the error, which does not stop the others from being adopted.
func (e *Executor) Adopt() ([]Instance, error) {
	if e.isClosed() {
		return nil, fmt.Errorf("adopting instances: %w", ErrClosed)
	}
	entries, err := os.ReadDir(e.stateDir)
	if err != nil {
		return nil, fmt.Errorf("adopting instances: listing %s: %w", e.stateDir, err)
	}
	var adopted []Instance
	var errs []error
	for _, d := range entries {
		runID, ok := strings.CutSuffix(d.Name(), ".json")
		if !ok || d.IsDir() {
			continue
		}
		if e.watching(runID) {
			continue // being started, watched or reported here
		}
		r, err := e.readRecord(runID)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its exit was handed over meanwhile
		}
		if err != nil {
			e.removeRecord(runID)
			errs = append(errs, err)
			continue
		}
		inst, ok, err := e.adopt(r)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			adopted = append(adopted, inst)
		}
	}
	return adopted, errors.Join(errs...)
}

func (e *Executor) watching(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[runID]
}

func (e *Executor) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

func (e *Executor) readRecord(runID string) (record, error) {
	b, err := os.ReadFile(e.recordPath(runID))
	if err != nil {
		return record{}, fmt.Errorf("reading state record %s: %w", runID, err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, fmt.Errorf("decoding state record %s: %w", runID, err)
	}
	if r.RunID != runID || r.JobID == "" || r.PID <= 1 || r.PGID <= 1 {
		return record{}, fmt.Errorf("state record %s is incomplete", runID)
	}
	return r, nil
}

// adopt watches one recorded instance if its shim still runs and reports it
// otherwise. ok is true when it runs.
func (e *Executor) adopt(r record) (Instance, bool, error) {
	sameBoot := r.BootID == "" || e.bootID == "" || r.BootID == e.bootID
	running := sameBoot && alive(r.PID, r.StartTicks)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Instance{}, false, fmt.Errorf("adopting job %s instance %d: %w", r.JobID, r.Instance, ErrClosed)
	}
	if e.runs[r.RunID] {
		e.mu.Unlock()
		return Instance{}, false, nil // already watched or reported
	}
	e.runs[r.RunID] = true
	if !running {
		e.mu.Unlock()
		// Processes of an earlier boot are gone, and its pids mean nothing.
		var strayErr error
		if sameBoot {
			strayErr = endLeftovers(r.cgroups(), r.PGID, r.leader())
		}
		x := recordedExit(Exit{JobID: r.JobID, Instance: r.Instance, RunID: r.RunID, Adopted: true}, e.exitPath(r.RunID), r.PID, false)
		x.Err = errors.Join(x.Err, strayErr)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.enqueueLocked(x, r.RunID)
		return Instance{}, false, nil
	}
	defer e.mu.Unlock()
	k := key{r.JobID, r.Instance}
	if e.procs[k] != nil {
		// Only a caller that started the instance again before adopting
		// can get here; two copies must not be watched under one name.
		delete(e.runs, r.RunID)
		return Instance{}, false, fmt.Errorf("adopting job %s instance %d (pid %d): %w", r.JobID, r.Instance, r.PGID, ErrAlreadyRunning)
	}
	inst := Instance{
		JobID: r.JobID, Instance: r.Instance, PID: r.PGID, PGID: r.PGID, ShimPID: r.PID,
		Cgroups: slices.Clone(r.Cgroups), StartedAt: r.StartedAt, LogPath: r.LogPath, RunID: r.RunID, Adopted: true,
	}
	p := &proc{
		inst: inst, runID: r.RunID, shimTicks: r.StartTicks, leaderTicks: r.leader(), cgroups: r.cgroups(),
		ready: make(chan struct{}), started: true,
	}
	close(p.ready)
	// A server that crashed while it was signalling the run may have left
	// it frozen.
	p.cgroups.thaw()
	e.procs[k] = p
	go e.watch(p)
	return inst, true, nil
}

// watch polls /proc for the end of an adopted instance's shim: it is not
// our child, so it cannot be waited for.
func (e *Executor) watch(p *proc) {
	tick := time.NewTicker(e.pollEvery)
	defer tick.Stop()
	for alive(p.inst.ShimPID, p.shimTicks) {
		select {
		case <-tick.C:
		case <-e.done:
			return
		}
	}
	e.ended(p, nil)
}

// recordedExit completes x from what the shim wrote to exitFile. Without
// it the shim was killed: by this Executor's SIGKILL when killed is true
// (a wrapper of an earlier version, which Stop's SIGKILL reached), otherwise
// by someone else, and then the status is unknown.
func recordedExit(x Exit, exitFile string, pid int, killed bool) Exit {
	b, err := os.ReadFile(exitFile)
	if err == nil {
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		status, perr := strconv.Atoi(strings.TrimSpace(lines[0]))
		if perr == nil && status >= 0 {
			x = exitFromStatus(x, status)
			var problems []error
			for _, line := range lines[1:] {
				if line == "oom-killed" {
					x.OOMKilled = true
				} else if why, ok := strings.CutPrefix(line, "reason: "); ok {
					x.Reason = why
				} else if msg, ok := strings.CutPrefix(line, "error: "); ok {
					problems = append(problems, errors.New(msg))
				}
			}
			if len(problems) > 0 {
				x.Err = fmt.Errorf("job %s instance %d: supervising the command: %w", x.JobID, x.Instance, errors.Join(problems...))
			}
			return x
		}
		err = fmt.Errorf("exit file holds %q", b)
	}
	if killed {
		return exitFromSignal(x, syscall.SIGKILL)
	}
	x.Code = -1
	if errors.Is(err, fs.ErrNotExist) {
		err = errors.New("no exit file")
	}
	x.Err = fmt.Errorf("job %s instance %d (shim pid %d): %w: %w", x.JobID, x.Instance, pid, ErrExitUnknown, err)
	return x
}
