package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// commandStartLimit bounds how long Start waits for the shim to start the
// command. It takes milliseconds, but on a machine starved of CPU (a CI run
// of every package's tests under the race detector) 5 s was once not
// enough.
const commandStartLimit = 30 * time.Second

// launch prepares the run's log directory and cgroups and starts its shim.
func (e *Executor) launch(spec Spec, env []string, program string, p *proc) (Instance, *exec.Cmd, error) {
	// 1. Prepare what the shim needs. The shim and the stage run in /, so
	// paths must not depend on the server's working directory.
	logPath, err := filepath.Abs(spec.LogPath)
	if err != nil {
		return Instance{}, nil, fmt.Errorf("finding the log: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return Instance{}, nil, fmt.Errorf("creating log directory: %w", err)
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil {
		return Instance{}, nil, fmt.Errorf("finding the working directory: %w", err)
	}
	var cgroups runCgroups
	if e.cgroups != nil {
		if cgroups, err = e.cgroups.create(p.runID, spec.Limits); err != nil {
			return Instance{}, nil, err
		}
	}
	tmp := spec.Limits.TmpBytes
	if !e.isolation.PrivateTmp {
		tmp = 0 // not applied, as Isolation says (Start refused it where it must be)
	}
	var keep []string
	if tmp > 0 {
		keep = keptDirs(dir, spec.Env)
	}
	deadlineFile := e.deadlinePath(p.runID)
	if err := writeDeadline(deadlineFile, spec.Limits.Deadline); err != nil {
		if len(cgroups.Dirs) > 0 {
			err = errors.Join(err, cgroups.remove())
		}
		return Instance{}, nil, err
	}
	startedAt := time.Now()
	cfg := shimConfig{
		Record: record{
			RunID: p.runID, JobID: spec.JobID, Instance: spec.Instance,
			CgroupVersion: cgroups.Version, Cgroups: cgroups.Dirs,
			BootID: e.bootID, StartedAt: startedAt, LogPath: logPath,
		},
		StateDir: e.stateDir,
		Command: stageConfig{
			Program: program, Args: slices.Clone(spec.Command), Env: env, Dir: dir,
			Credential: spec.Credential, TmpBytes: tmp, Keep: keep,
		},
		LogBytes:     spec.Limits.LogBytes,
		DiskBytes:    spec.Limits.DiskBytes,
		DeadlineFile: deadlineFile,
		Deadline:     spec.Limits.Deadline,
		StopGrace:    spec.Limits.StopGrace,
	}

	// 2. Start the shim and wait until it has started the command.
	cmd, pid, leaderTicks, err := startShim(cfg)
	if err == nil {
		var st procStat
		if st, err = readStat(cmd.Process.Pid); err == nil {
			p.shimTicks = st.startTicks
		}
	}
	if err != nil {
		if cmd != nil {
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if len(cgroups.Dirs) > 0 {
			err = errors.Join(err, cgroups.kill(), cgroups.remove())
		}
		e.removeRecord(p.runID)
		return Instance{}, nil, err
	}
	p.leaderTicks, p.cgroups = leaderTicks, cgroups
	inst := Instance{
		JobID: spec.JobID, Instance: spec.Instance, PID: pid, PGID: pid, ShimPID: cmd.Process.Pid,
		Cgroups: slices.Clone(cgroups.Dirs), StartedAt: startedAt, LogPath: logPath, RunID: p.runID,
	}
	return inst, cmd, nil
}

// startShim starts a shim and returns once it reports that the command
// runs, with the command's pid and start time. On an error the shim, if it
// started, has not been waited for.
func startShim(cfg shimConfig) (*exec.Cmd, int, uint64, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("creating a pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, 0, 0, fmt.Errorf("creating a pipe: %w", err)
	}
	defer statusR.Close()
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{shimArg0},
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{cfgR, statusW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	cfgR.Close()
	statusW.Close()
	if err != nil {
		cfgW.Close()
		return nil, 0, 0, fmt.Errorf("starting the shim: %w", err)
	}
	err = json.NewEncoder(cfgW).Encode(cfg)
	cfgW.Close()
	if err != nil {
		return cmd, 0, 0, fmt.Errorf("configuring the shim: %w", err)
	}
	_ = statusR.SetReadDeadline(time.Now().Add(commandStartLimit))
	line, err := io.ReadAll(statusR)
	var pid int
	var ticks uint64
	if _, serr := fmt.Sscanf(string(line), "running %d %d\n", &pid, &ticks); serr == nil && pid > 1 {
		return cmd, pid, ticks, nil
	}
	switch {
	case bytes.HasPrefix(line, []byte(diskLimitPrefix)):
		return cmd, 0, 0, diskLimitError{msg: strings.TrimSpace(string(line[len(diskLimitPrefix):]))}
	case len(line) > 0:
		return cmd, 0, 0, errors.New(strings.TrimSpace(string(line)))
	case err != nil:
		return cmd, 0, 0, fmt.Errorf("waiting for the shim to start the command: %w", err)
	default:
		return cmd, 0, 0, errors.New("the shim ended before starting the command")
	}
}

// waitChild waits for the shim of an instance that this Executor started.
func (e *Executor) waitChild(p *proc, cmd *exec.Cmd) {
	_ = cmd.Wait()
	e.ended(p, cmd.ProcessState)
}

// ended reports an instance whose shim has exited, once what the shim left
// behind is gone: a shim that was killed leaves its command running. shim
// is the shim's state where it was this Executor's child.
func (e *Executor) ended(p *proc, shim *os.ProcessState) {
	e.mu.Lock()
	p.exited = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	closed, killed, killErr := e.closed, p.killed, p.killErr
	e.mu.Unlock()
	if closed {
		return // the next Executor cleans up and reports, as after a crash
	}
	strayErr := endLeftovers(p.cgroups, p.inst.PGID, p.leaderTicks)
	base := Exit{JobID: p.inst.JobID, Instance: p.inst.Instance, RunID: p.runID, Adopted: p.inst.Adopted}
	x := recordedExit(base, e.exitPath(p.runID), p.inst.ShimPID, killed)
	if errors.Is(x.Err, ErrExitUnknown) && shim != nil && shim.Exited() {
		// The shim could not write the exit file but exited with the
		// command's status.
		x = exitFromStatus(base, shim.ExitCode())
	}
	x.Err = errors.Join(x.Err, strayErr, killErr)
	e.finish(p, x)
}

// endLeftovers ends what a run whose shim has exited left behind; a shim
// that was not killed has done so itself.
func endLeftovers(cgroups runCgroups, pgid int, leaderTicks uint64) error {
	if len(cgroups.Dirs) > 0 {
		if !cgroups.exists() {
			return nil
		}
		return errors.Join(cgroups.kill(), cgroups.remove())
	}
	return killStrays(pgid, leaderTicks)
}

// finish forgets an instance that has ended and queues its exit.
func (e *Executor) finish(p *proc, x Exit) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := key{p.inst.JobID, p.inst.Instance}
	if e.procs[k] == p {
		delete(e.procs, k)
	}
	e.enqueueLocked(x, p.runID)
}

func (e *Executor) enqueueLocked(x Exit, runID string) {
	if e.closed {
		return
	}
	e.runs[runID] = true
	e.queue = append(e.queue, ended{exit: x, runID: runID})
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// pump hands queued exits to the Exits channel, so that watching processes
// never waits for a slow reader.
func (e *Executor) pump() {
	defer close(e.exits)
	for {
		e.mu.Lock()
		if len(e.queue) == 0 {
			e.mu.Unlock()
			select {
			case <-e.wake:
				continue
			case <-e.done:
				return
			}
		}
		next := e.queue[0]
		e.queue[0] = ended{}
		e.queue = e.queue[1:]
		e.mu.Unlock()
		select {
		case e.exits <- next.exit:
			e.removeRecord(next.runID)
			e.mu.Lock()
			delete(e.runs, next.runID)
			e.mu.Unlock()
		case <-e.done:
			return
		}
	}
}
