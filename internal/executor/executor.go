// Package executor runs job instances as operating-system processes on this
// machine, for the sim and local backends. It is mechanism only: it starts,
// signals and watches processes and reports how they ended; what to run,
// as whom, when to stop it and whether to restart it are decided by its
// callers.
//
// Jobs are untrusted code. Each run of an instance is supervised by a shim,
// the server's own executable started again through /proc/self/exe with
// "capblock-job-shim" as its argv[0] (init recognises it, in any program
// that imports this package):
//
//	server
//	└─ shim: root, a session of its own, oom_score_adj -1000 (where it
//	   │  may), not in the run's cgroups
//	   └─ command: the job's user and group, no supplementary groups,
//	      a process group of its own, in the run's cgroups with its limits
//
// The shim starts the command through a stage, the executable once more as
// "capblock-job-exec", which joins the run's cgroups, drops to the job's
// credential and executes the command; so the command starts inside its
// cgroups and nothing of the shim is ever in them. Their configuration
// travels through inherited pipes; the command's environment is the job's
// alone. The shim pumps the command's stdout and stderr into the
// instance's log, which keeps the newest Limits.LogBytes at most (see
// ReadLog); it waits for the command, kills whatever the command left in
// its cgroups, drains the output, writes the command's exit status to
// <state>/<run>.exit (128+n for signal n), removes the cgroups and exits
// with that status. It ignores SIGTERM, SIGINT and SIGHUP through a handler,
// which the command does not inherit: the command alone decides how to
// react to them. Start returns once the command runs.
//
// The command's environment is a fixed base (PATH=DefaultPath, HOME, LANG,
// TMPDIR) under the job's variables: nothing of the server's. With
// Limits.TmpBytes the stage runs in a mount namespace of its own and
// gives the command /tmp, /dev/shm and /var/tmp on one tmpfs of that size
// (privatetmp.go). With Limits.DiskBytes the shim measures the working
// directory and ends the command past the limit (diskuse.go). With
// Limits.Deadline the shim ends the command by itself at that time on the
// wall clock, SIGTERM and then SIGKILL of everything it started, whether
// or not a server still watches it; SetDeadline moves it (deadline.go).
// So a run outlives neither its time nor its server's last word on it,
// and its shim exits when the run ends. Exit.Reason says why the shim
// ended a run.
//
// A run's cgroups are created under the server's own cgroup, in a capblock
// subtree: <own cgroup>/capblock/<run>; the subtree stays, its runs' cgroups
// go with them. Under cgroup v2 (a cgroup2 file system at /sys/fs/cgroup)
// a run has one cgroup, with memory.max and pids.max, and is ended with
// cgroup.kill. For the server's cgroup to pass the memory and pids
// controllers on, it must hold no process itself: where it holds only the
// server and shims, they move to a leaf next to the subtree,
// <own cgroup>/capblock-server (as systemd's DelegateSubgroup= would put
// them); where it holds others, runs get cgroups without limits, as
// Isolation reports. Under version 1 a run has a cgroup of each of the
// controllers freezer, memory and pids, under the server's cgroup of that
// controller, with memory.limit_in_bytes and pids.max, and is ended by
// freezing it, sending SIGKILL to each of its processes and thawing it,
// until none is left. Stop sends SIGTERM to every process of the run,
// frozen meanwhile so that none is missed, and kills them all when the
// grace ends. A process that leaves the process group (setsid) stays in
// the cgroup, and so ends with the rest.
//
// Where cgroups cannot be used (the server is not root, or no hierarchy is
// writable), instances are contained by their process groups only, as
// Isolation reports: Stop signals the command's group, and what is left of
// it is killed when the command ends, but a process that leaves the group
// escapes. RequireCgroups makes New refuse to run that way.
//
// Once the command runs, the shim writes the run's record, <run>.json: its
// own pid and start time (read from /proc/<pid>/stat), the command's, and
// the cgroups. After a server crash a new Executor on the same state
// directory reads the records (Adopt): a shim that still runs with the
// recorded start time is watched again, and the .exit file tells how a run
// whose shim ended in the meantime ended, exit code included.
package executor

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
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
	// the PATH of Env (or DefaultPath) unless it holds a slash.
	Command []string
	// Env is added to a fixed base, PATH=DefaultPath, HOME=Dir, LANG=C.UTF-8
	// and TMPDIR=/tmp, and wins over it; nothing comes from the server's
	// own environment. Build it with JobEnv.
	Env map[string]string
	// Dir is the working directory; empty means the server's own. The
	// command enters it as its Credential. Limits.DiskBytes bounds what it
	// holds.
	Dir string
	// LogPath is the file that stdout and stderr are appended to (relative
	// to the server's working directory); missing directories are created,
	// with mode 0700, and the file with mode 0600. See ReadLog. The log is
	// never opened through a symbolic link, so the directory that holds it
	// may be writable by the job, but no directory above that may be.
	LogPath string
	// Credential is the user and group the command runs as, with no
	// supplementary groups and no way to gain privileges (no_new_privs);
	// nil runs it as the server's user. The caller prepares the directories
	// that the user needs.
	Credential *Credential
	// Limits bound what the instance may use.
	Limits Limits
}

// Credential is a numeric user and group.
type Credential struct {
	UID, GID uint32
}

// Limits bound one instance; a zero field is no limit. MemoryBytes and
// PIDs need the cgroup controllers that Isolation reports. Where one is
// missing, an Executor made with RequireCgroups refuses the limit, and any
// other leaves it unapplied, as it runs its instances without cgroups.
type Limits struct {
	// MemoryBytes bounds the memory (and swap) of all the instance's
	// processes together; past it the kernel kills one of them.
	MemoryBytes int64
	// PIDs bounds how many processes and threads the instance may have at
	// once; past it fork fails.
	PIDs int64
	// LogBytes bounds the log file, which keeps the newest output; at least
	// MinLogBytes.
	LogBytes int64
	// TmpBytes gives the instance a /tmp, /dev/shm and /var/tmp of its
	// own, one tmpfs of this size in a mount namespace of the instance's
	// (see privatetmp.go): past it, writes there fail with ENOSPC, and
	// the host's /tmp is never touched. It needs root (Isolation's
	// PrivateTmp). Its pages are memory, and count against MemoryBytes.
	TmpBytes int64
	// DiskBytes bounds what the working directory (Spec.Dir) holds on
	// disk: the shim refuses to start the command when the directory
	// holds more, and ends it (SIGKILL) once it does, saying so in the
	// log and on the Exit (see diskuse.go for how, and how closely).
	DiskBytes int64
	// Deadline is when the shim ends the instance by itself, on the wall
	// clock, whether or not a server still watches it: SIGTERM at
	// Deadline less StopGrace, SIGKILL to every process of the run at
	// Deadline. SetDeadline moves it. Zero is none.
	Deadline time.Time
	// StopGrace is the time between the SIGTERM and the SIGKILL of a
	// Deadline.
	StopGrace time.Duration
}

// Instance is a running instance of a job.
type Instance struct {
	JobID    string
	Instance int
	// PID is the command's process id. The command leads a process group of
	// its own, PGID, which equals PID.
	PID  int
	PGID int
	// ShimPID is the process that supervises the command; the instance runs
	// until it exits.
	ShimPID int
	// Cgroups are the directories of the instance's cgroups; none when it
	// runs without.
	Cgroups   []string
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
	// OOMKilled is true when the kernel killed a process of the instance
	// for going past its memory limit.
	OOMKilled bool
	// Reason says why the shim ended the instance itself, when it did:
	// its Deadline passed, or its working directory went past DiskBytes.
	Reason string
	// Err says what went wrong while watching the instance, if anything.
	Err error
	// Adopted is true when the instance was started by an earlier Executor.
	Adopted bool
}

// Isolation says how an Executor contains its instances.
type Isolation struct {
	// CgroupVersion is 2 or 1 when each instance runs in cgroups of its
	// own, 0 when instances are contained by their process groups only.
	CgroupVersion int
	// Memory and PIDs say whether Limits.MemoryBytes and Limits.PIDs can be
	// applied.
	Memory, PIDs bool
	// Reason says why cgroups, or some of their controllers, are not used.
	Reason string
	// PrivateTmp says whether Limits.TmpBytes can be applied: each
	// instance's /tmp a tmpfs in a mount namespace of its own. TmpReason
	// says why not.
	PrivateTmp bool
	TmpReason  string
}

var (
	// ErrAlreadyRunning is returned by Start for an instance that runs.
	ErrAlreadyRunning = errors.New("job instance is already running")
	// ErrExitUnknown is set on an Exit whose status could not be learned:
	// an instance whose shim was killed outright.
	ErrExitUnknown = errors.New("exit status unknown")
	// ErrStateDirInUse is returned by New when another Executor, in this or
	// another process, holds the state directory.
	ErrStateDirInUse = errors.New("state directory is in use by another executor")
	// ErrClosed is returned by calls on a closed Executor.
	ErrClosed = errors.New("executor is closed")
	// ErrNoCgroups is returned by New with RequireCgroups where instances
	// cannot have cgroups of their own.
	ErrNoCgroups = errors.New("cgroups are not available")
	// ErrLimitUnsupported is returned by Start, on an Executor made with
	// RequireCgroups, for a limit that this machine's cgroups cannot apply.
	ErrLimitUnsupported = errors.New("limit cannot be applied")
	// ErrDiskLimit is returned by Start when the instance's working
	// directory already holds more than Limits.DiskBytes.
	ErrDiskLimit = errors.New("the job's working directory is past its disk limit")
)

// Option changes how New sets an Executor up.
type Option func(*options)

type options struct {
	requireCgroups bool
	noCgroups      bool   // tests: run as without cgroups
	cgroup2At      string // tests: use this cgroup2 mount
	noPrivateTmp   bool   // tests: run as without mount namespaces
}

// RequireCgroups makes New fail with ErrNoCgroups where instances cannot run
// in cgroups of their own, instead of falling back to process groups, and
// Start fail with ErrLimitUnsupported for a limit that cannot be applied
// (a private /tmp too): instances run contained and limited as asked, or
// not at all.
func RequireCgroups() Option {
	return func(o *options) { o.requireCgroups = true }
}

// defaultPoll is how often an adopted shim, which is not our child and so
// cannot be waited for, is checked in /proc.
const defaultPoll = 200 * time.Millisecond

// Executor starts, stops and watches job instances. Its methods are safe for
// concurrent use.
type Executor struct {
	stateDir  string
	bootID    string
	pollEvery time.Duration
	lock      *os.File // holds an flock on the state directory
	cgroups   *cgroupHost
	isolation Isolation
	// strict refuses limits that cannot be applied (RequireCgroups).
	strict bool

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
// are guarded by Executor.mu; those set before ready is closed are not
// changed after.
type proc struct {
	inst  Instance
	runID string
	// shimTicks and leaderTicks are the start times of the shim and of the
	// command that leads the process group.
	shimTicks   uint64
	leaderTicks uint64
	cgroups     runCgroups
	ready       chan struct{} // closed once Start has finished, either way
	started     bool
	exited      bool
	termSent    bool
	killed      bool
	killErr     error
	killAt      time.Time
	killTimer   *time.Timer
}

// New returns an Executor that records its instances in stateDir, creating
// it with mode 0700. Only one Executor may use a state directory at a time;
// the lock is an flock, so a crashed server's lock goes with it.
func New(stateDir string, opts ...Option) (*Executor, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
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
	if err := os.Chmod(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("restricting state directory %s: %w", stateDir, err)
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
	cgroups, isolation := findCgroups(o)
	isolation.PrivateTmp, isolation.TmpReason = findPrivateTmp(o)
	if cgroups == nil && o.requireCgroups {
		lock.Close()
		return nil, fmt.Errorf("opening executor on %s: %w: %s", stateDir, ErrNoCgroups, isolation.Reason)
	}
	e := &Executor{
		stateDir:  stateDir,
		bootID:    readBootID(),
		pollEvery: defaultPoll,
		lock:      lock,
		cgroups:   cgroups,
		isolation: isolation,
		strict:    o.requireCgroups,
		procs:     map[key]*proc{},
		runs:      map[string]bool{},
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		exits:     make(chan Exit),
	}
	go e.pump()
	return e, nil
}

// Isolation reports how instances are contained, and why not better.
func (e *Executor) Isolation() Isolation { return e.isolation }

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

// Start starts an instance and returns once its command runs, so that a
// Stop right after it reaches the command. It fails with ErrAlreadyRunning
// while an instance with the same job id and rank runs, with
// ErrLimitUnsupported for a limit that cannot be applied (see Limits), and
// when the command cannot be found or started as its credential. A new run
// of an instance may start as soon as the previous run has ended; their
// Exits differ by RunID.
func (e *Executor) Start(spec Spec) (Instance, error) {
	// 1. Check the spec and work out the environment and the program.
	if err := e.checkSpec(spec); err != nil {
		return Instance{}, fmt.Errorf("starting job %q instance %d: %w", spec.JobID, spec.Instance, err)
	}
	var err error
	dir := spec.Dir
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return Instance{}, fmt.Errorf("starting job %s instance %d: finding the working directory: %w", spec.JobID, spec.Instance, err)
		}
	}
	env, err := childEnv(spec.Env, dir)
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

	// 3. Start the shim, which starts the command and records the run.
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

func (e *Executor) checkSpec(spec Spec) error {
	l := spec.Limits
	switch {
	case spec.JobID == "" || len(spec.Command) == 0 || spec.LogPath == "":
		return errors.New("job id, command and log path are required")
	case l.MemoryBytes < 0 || l.PIDs < 0 || l.LogBytes < 0 || l.TmpBytes < 0 || l.DiskBytes < 0 || l.StopGrace < 0:
		return fmt.Errorf("limits must not be negative: %+v", l)
	case l.DiskBytes > 0 && spec.Dir == "":
		return errors.New("a disk limit needs a working directory of the job's own (Dir)")
	case l.LogBytes > 0 && l.LogBytes < MinLogBytes:
		return fmt.Errorf("log limit %d is below the least, %d bytes", l.LogBytes, MinLogBytes)
	case e.strict && l.MemoryBytes > 0 && !e.isolation.Memory:
		return fmt.Errorf("memory: %w: %s", ErrLimitUnsupported, e.isolation.Reason)
	case e.strict && l.PIDs > 0 && !e.isolation.PIDs:
		return fmt.Errorf("pids: %w: %s", ErrLimitUnsupported, e.isolation.Reason)
	case e.strict && l.TmpBytes > 0 && !e.isolation.PrivateTmp:
		return fmt.Errorf("a private /tmp: %w: %s", ErrLimitUnsupported, e.isolation.TmpReason)
	}
	return nil
}
