// Package executor runs job instances as operating-system processes on this
// machine, for the sim and local backends. It is mechanism only: it starts,
// signals and watches processes and reports how they ended; what to run,
// when to stop it and whether to restart it are decided by its callers.
//
// Each instance runs under a small /bin/sh wrapper, in a process group of
// its own, with stdout and stderr appended to its log file:
//
//	/bin/sh -c '<wrapper>' capblock-run <state>/<run>.exit /path/to/cmd args...
//
// The wrapper runs the command as its child, writes the command's exit
// status to the .exit file and exits with it. Next to it a <run>.json record
// holds the pid, the process group and the start time read from
// /proc/<pid>/stat. After a server crash, a new Executor on the same state
// directory reads the records (Adopt): a process that still runs with the
// recorded start time is watched again, and the .exit file tells how one
// that ended in the meantime ended, exit code included.
//
// Stop signals the whole group, wrapper and command alike. The wrapper traps
// SIGTERM with a handler, which the command does not inherit, and a shell
// runs a trap only after its foreground command has finished; so the command
// alone decides how to react to SIGTERM, and the wrapper still records the
// outcome. A SIGTERM that reached the wrapper before it started the command
// would be swallowed by the trap, so Start returns only once the command
// runs. SIGKILL takes the wrapper with it; the executor then reports the
// kill itself. When an instance ends, what is left of its group is killed.
package executor

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Spec describes one instance of a job to start.
type Spec struct {
	JobID string
	// Instance is the instance's rank within the job.
	Instance int
	// Command is the program and its arguments; the program is looked up in
	// the PATH of Env (or the inherited PATH) unless it holds a slash.
	Command []string
	// Env is added to the inherited PATH, HOME, LANG and TMPDIR and wins over
	// them; build it with JobEnv.
	Env map[string]string
	// Dir is the working directory; empty means the server's own.
	Dir string
	// LogPath is the file that stdout and stderr are appended to; missing
	// directories are created.
	LogPath string
}

// Instance is a running instance of a job.
type Instance struct {
	JobID    string
	Instance int
	PID      int
	// PGID is the process group that Stop signals; it equals PID.
	PGID      int
	StartedAt time.Time
	LogPath   string
	// RunID names this run of the instance; it is kept across server
	// restarts and is on the run's Exit, so that a caller can tell the end of
	// this run from the end of an earlier run of the same instance.
	RunID string
	// Adopted is true for an instance that an earlier Executor started.
	Adopted bool
}

// Exit reports how an instance ended. Code is the exit status the way a shell
// reports it: 128+n for a process killed by signal n (and then Signaled is
// true and Signal names it, such as "SIGTERM"), -1 when it is unknown (and
// then Err wraps ErrExitUnknown).
type Exit struct {
	JobID    string
	Instance int
	RunID    string
	Code     int
	Signaled bool
	Signal   string
	// Err says what went wrong while watching the instance, if anything.
	Err error
	// Adopted is true when the instance was started by an earlier Executor.
	Adopted bool
}

var (
	// ErrAlreadyRunning is returned by Start for an instance that runs.
	ErrAlreadyRunning = errors.New("job instance is already running")
	// ErrExitUnknown is set on an Exit whose status could not be learned: an
	// adopted instance whose wrapper was killed outright.
	ErrExitUnknown = errors.New("exit status unknown")
	// ErrStateDirInUse is returned by New when another Executor, in this or
	// another process, holds the state directory.
	ErrStateDirInUse = errors.New("state directory is in use by another executor")
	// ErrClosed is returned by calls on a closed Executor.
	ErrClosed = errors.New("executor is closed")
)

// wrapperScript runs "$@" and records its exit status in the file named by
// $1. The trap's handler (unlike an ignored signal) is reset for the
// command, and the shell runs it only once the command has finished.
const wrapperScript = `trap : TERM INT HUP
f=$1
shift
"$@"
s=$?
echo "$s" >"$f"
exit "$s"`

// commandStartLimit bounds how long Start waits for the wrapper to start the
// command; past it Start returns anyway, and a Stop right after it could be
// swallowed by the wrapper's trap. It takes milliseconds, but on a machine
// starved of CPU (a CI run of every package's tests under the race
// detector) 5 s was once not enough.
const commandStartLimit = 30 * time.Second

// defaultPoll is how often an adopted process, which is not our child and so
// cannot be waited for, is checked in /proc.
const defaultPoll = 200 * time.Millisecond

// Executor starts, stops and watches job instances. Its methods are safe for
// concurrent use.
type Executor struct {
	stateDir  string
	bootID    string
	pollEvery time.Duration
	lock      *os.File // holds an flock on the state directory

	mu     sync.Mutex
	procs  map[key]*proc
	runs   map[string]bool // run ids being watched or whose exit is queued
	queue  []ended
	closed bool

	wake  chan struct{}
	done  chan struct{}
	exits chan Exit
}

type key struct {
	job      string
	instance int
}

// ended is an exit waiting to be handed over; its run's files are removed
// only once it has been, so that a crash before then reports it again.
type ended struct {
	exit  Exit
	runID string
}

// proc is the executor's view of one instance. Its fields other than ready
// are guarded by Executor.mu.
type proc struct {
	inst       Instance
	runID      string
	startTicks uint64
	ready      chan struct{} // closed once Start has finished, either way
	started    bool
	exited     bool
	termSent   bool
	killed     bool
	killErr    error
	killAt     time.Time
	killTimer  *time.Timer
}

// New returns an Executor that records its instances in stateDir, creating
// it. Only one Executor may use a state directory at a time; the lock is an
// flock, so a crashed server's lock goes with it.
func New(stateDir string) (*Executor, error) {
	// Jobs run in directories of their own: paths they are given must not
	// depend on the server's working directory.
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	stateDir = abs
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory %s: %w", stateDir, err)
	}
	lock, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock of state directory %s: %w", stateDir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("opening executor on %s: %w", stateDir, ErrStateDirInUse)
		}
		return nil, fmt.Errorf("locking state directory %s: %w", stateDir, err)
	}
	e := &Executor{
		stateDir:  stateDir,
		bootID:    readBootID(),
		pollEvery: defaultPoll,
		lock:      lock,
		procs:     map[key]*proc{},
		runs:      map[string]bool{},
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		exits:     make(chan Exit),
	}
	go e.pump()
	return e, nil
}

// Exits delivers one Exit for every instance that was started or adopted
// and has ended, in the order they ended. Undelivered exits wait without
// bounds. The channel is closed by Close.
func (e *Executor) Exits() <-chan Exit { return e.exits }

// Close lets go of the instances without stopping them, as a crash would:
// their records stay in the state directory for the next Executor to Adopt,
// along with the exits not yet delivered. It closes the Exits channel.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	for _, p := range e.procs {
		if p.killTimer != nil {
			p.killTimer.Stop()
		}
	}
	e.mu.Unlock()
	close(e.done)
	if err := e.lock.Close(); err != nil {
		return fmt.Errorf("unlocking state directory %s: %w", e.stateDir, err)
	}
	return nil
}

// Start starts an instance and returns once its command runs (or has
// already ended), so that a Stop right after it reaches the command. It
// fails with ErrAlreadyRunning while an instance with the same job id and
// rank runs, and when the command cannot be found. A new run of an instance
// may start as soon as the previous run has ended; their Exits differ by
// RunID.
func (e *Executor) Start(spec Spec) (Instance, error) {
	// 1. Check the spec and work out the environment and the program.
	if spec.JobID == "" || len(spec.Command) == 0 || spec.LogPath == "" {
		return Instance{}, fmt.Errorf("starting job %q instance %d: job id, command and log path are required", spec.JobID, spec.Instance)
	}
	env, err := childEnv(spec.Env)
	if err != nil {
		return Instance{}, fmt.Errorf("starting job %s instance %d: %w", spec.JobID, spec.Instance, err)
	}
	program, err := resolveCommand(spec.Command[0], spec.Dir, lookupEnv(env, "PATH"))
	if err != nil {
		return Instance{}, fmt.Errorf("starting job %s instance %d: %w", spec.JobID, spec.Instance, err)
	}

	// 2. Reserve the instance, so that a concurrent start of it fails.
	k := key{spec.JobID, spec.Instance}
	p := &proc{runID: rand.Text(), ready: make(chan struct{})}
	defer close(p.ready)
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return Instance{}, fmt.Errorf("starting job %s instance %d: %w", spec.JobID, spec.Instance, ErrClosed)
	case e.procs[k] != nil:
		e.mu.Unlock()
		return Instance{}, fmt.Errorf("starting job %s instance %d: %w", spec.JobID, spec.Instance, ErrAlreadyRunning)
	}
	e.procs[k] = p
	e.runs[p.runID] = true
	e.mu.Unlock()

	// 3. Start the process and record it.
	inst, cmd, err := e.launch(spec, env, program, p)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		delete(e.procs, k)
		delete(e.runs, p.runID)
		return Instance{}, fmt.Errorf("starting job %s instance %d: %w", spec.JobID, spec.Instance, err)
	}
	p.inst = inst
	p.started = true
	go e.waitChild(p, cmd)
	return inst, nil
}

// launch starts the wrapper and writes the instance's record.
func (e *Executor) launch(spec Spec, env []string, program string, p *proc) (Instance, *exec.Cmd, error) {
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		return Instance{}, nil, fmt.Errorf("creating log directory: %w", err)
	}
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return Instance{}, nil, fmt.Errorf("opening log: %w", err)
	}
	defer logFile.Close() // the child has its own copy

	args := []string{"/bin/sh", "-c", wrapperScript, "capblock-run", e.exitPath(p.runID), program}
	cmd := &exec.Cmd{
		Path:        "/bin/sh",
		Args:        append(args, spec.Command[1:]...),
		Env:         env,
		Dir:         spec.Dir,
		Stdout:      logFile,
		Stderr:      logFile,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		return Instance{}, nil, fmt.Errorf("starting process: %w", err)
	}
	inst := Instance{
		JobID:     spec.JobID,
		Instance:  spec.Instance,
		PID:       cmd.Process.Pid,
		PGID:      cmd.Process.Pid,
		StartedAt: time.Now(),
		LogPath:   spec.LogPath,
		RunID:     p.runID,
	}
	st, err := readStat(inst.PID)
	if err == nil {
		p.startTicks = st.startTicks
		err = e.writeRecord(record{
			RunID: p.runID, JobID: inst.JobID, Instance: inst.Instance,
			PID: inst.PID, PGID: inst.PGID, StartTicks: st.startTicks,
			BootID: e.bootID, StartedAt: inst.StartedAt, LogPath: inst.LogPath,
		})
	}
	if err != nil {
		// Unrecorded, the process could not be found again after a crash.
		_ = killGroup(inst.PGID, syscall.SIGKILL)
		_ = cmd.Wait()
		e.removeRecord(p.runID)
		return Instance{}, nil, err
	}
	awaitCommand(inst.PID, p.startTicks, e.exitPath(p.runID), commandStartLimit)
	return inst, cmd, nil
}

// waitChild waits for an instance that this Executor started.
func (e *Executor) waitChild(p *proc, cmd *exec.Cmd) {
	waitErr := waitExited(p.inst.PID)
	e.mu.Lock()
	p.exited = true
	if p.killTimer != nil {
		p.killTimer.Stop()
	}
	closed, killErr := e.closed, p.killErr
	e.mu.Unlock()
	// The command's leftovers die with it. The leader is not reaped yet, so
	// the group id is still ours. A closed Executor leaves this to the next
	// one, as a crashed server would.
	var strayErr error
	if !closed && waitErr == nil {
		strayErr = killGroup(p.inst.PGID, syscall.SIGKILL)
	}
	err := cmd.Wait()

	x := Exit{JobID: p.inst.JobID, Instance: p.inst.Instance, RunID: p.runID}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		x = exitFromSignal(x, ws.Signal())
	} else {
		x = exitFromStatus(x, cmd.ProcessState.ExitCode())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		x.Err = fmt.Errorf("waiting for job %s instance %d: %w", p.inst.JobID, p.inst.Instance, err)
	}
	x.Err = errors.Join(x.Err, waitErr, strayErr, killErr)
	e.finish(p, x)
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
