package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// record is the state file of one run of an instance, <run>.json in the
// state directory. It lives from Start until the run's exit is handed over.
type record struct {
	RunID      string `json:"run_id"`
	JobID      string `json:"job_id"`
	Instance   int    `json:"instance"`
	PID        int    `json:"pid"`
	PGID       int    `json:"pgid"`
	StartTicks uint64 `json:"start_ticks"`
	// BootID tells a record of an earlier boot, whose processes are gone
	// whatever pid now has the same number and start time.
	BootID    string    `json:"boot_id"`
	StartedAt time.Time `json:"started_at"`
	LogPath   string    `json:"log_path"`
}

func (e *Executor) recordPath(runID string) string {
	return filepath.Join(e.stateDir, runID+".json")
}

func (e *Executor) exitPath(runID string) string {
	return filepath.Join(e.stateDir, runID+".exit")
}

// writeRecord writes a record in one write call: a crash leaves either no
// file, an empty one or the whole record, never half of it.
func (e *Executor) writeRecord(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding state record: %w", err)
	}
	if err := os.WriteFile(e.recordPath(r.RunID), b, 0o600); err != nil {
		return fmt.Errorf("writing state record: %w", err)
	}
	return nil
}

func (e *Executor) removeRecord(runID string) {
	_ = os.Remove(e.recordPath(runID))
	_ = os.Remove(e.exitPath(runID))
}

// Adopt takes over the instances recorded in the state directory by an
// earlier Executor, typically one in a server that crashed, and returns those
// that still run; they are watched as if started here and can be stopped.
// Each recorded instance that ended in the meantime is reported on Exits,
// with its status when its wrapper recorded one. Instances this Executor
// already watches are skipped, so Adopt may be called again. Unreadable
// records are removed and reported in the error, which does not stop the
// others from being adopted.
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

// adopt watches one recorded instance if it still runs and reports it
// otherwise. ok is true when it runs.
func (e *Executor) adopt(r record) (Instance, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Instance{}, false, fmt.Errorf("adopting job %s instance %d: %w", r.JobID, r.Instance, ErrClosed)
	}
	if e.runs[r.RunID] {
		return Instance{}, false, nil // already watched or reported
	}
	sameBoot := r.BootID == "" || e.bootID == "" || r.BootID == e.bootID
	if !sameBoot || !alive(r.PID, r.StartTicks) {
		x := recordedExit(Exit{JobID: r.JobID, Instance: r.Instance, RunID: r.RunID, Adopted: true}, e.exitPath(r.RunID), r.PID, false)
		e.enqueueLocked(x, r.RunID)
		return Instance{}, false, nil
	}
	k := key{r.JobID, r.Instance}
	if e.procs[k] != nil {
		// Only a caller that started the instance again before adopting
		// can get here; two copies must not be watched under one name.
		return Instance{}, false, fmt.Errorf("adopting job %s instance %d (pid %d): %w", r.JobID, r.Instance, r.PID, ErrAlreadyRunning)
	}
	inst := Instance{
		JobID: r.JobID, Instance: r.Instance, PID: r.PID, PGID: r.PGID,
		StartedAt: r.StartedAt, LogPath: r.LogPath, RunID: r.RunID, Adopted: true,
	}
	p := &proc{inst: inst, runID: r.RunID, startTicks: r.StartTicks, ready: make(chan struct{}), started: true}
	close(p.ready)
	e.procs[k] = p
	e.runs[r.RunID] = true
	go e.watch(p)
	return inst, true, nil
}

// watch polls /proc for the end of an adopted instance: it is not our
// child, so it cannot be waited for.
func (e *Executor) watch(p *proc) {
	tick := time.NewTicker(e.pollEvery)
	defer tick.Stop()
	for alive(p.inst.PID, p.startTicks) {
		select {
		case <-tick.C:
		case <-e.done:
			return
		}
	}
	e.mu.Lock()
	p.exited = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	closed, killed, killErr := e.closed, p.killed, p.killErr
	e.mu.Unlock()
	if closed {
		return
	}
	strayErr := killStrays(p.inst.PGID, p.startTicks)
	x := recordedExit(Exit{JobID: p.inst.JobID, Instance: p.inst.Instance, RunID: p.runID, Adopted: true}, e.exitPath(p.runID), p.inst.PID, killed)
	x.Err = errors.Join(x.Err, strayErr, killErr)
	e.finish(p, x)
}

// recordedExit completes x from the status the wrapper wrote to exitFile.
// Without one the wrapper was killed: by this Executor's SIGKILL when killed
// is true, otherwise by someone else, and then the status is unknown.
func recordedExit(x Exit, exitFile string, pid int, killed bool) Exit {
	b, err := os.ReadFile(exitFile)
	if err == nil {
		status, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if perr == nil && status >= 0 {
			return exitFromStatus(x, status)
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
	x.Err = fmt.Errorf("job %s instance %d (pid %d): %w: %w", x.JobID, x.Instance, pid, ErrExitUnknown, err)
	return x
}
