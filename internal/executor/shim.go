package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The shim and the stage are this very executable, started again through
// /proc/self/exe under an argv[0] of their own, which init recognises before
// anything else of the program runs. Their configuration comes through
// inherited pipes, never through the environment, which belongs to the
// job.
const (
	shimArg0  = "capblock-job-shim"
	stageArg0 = "capblock-job-exec"
)

func init() {
	if len(os.Args) == 0 {
		return
	}
	// syscall.Exit, unlike os.Exit, leaves the status alone in a build with
	// the race detector, which would also hold the exit up for a second.
	switch os.Args[0] {
	case shimArg0:
		syscall.Exit(runShim())
	case stageArg0:
		syscall.Exit(runStage())
	case probeArg0:
		syscall.Exit(runProbe())
	}
}

// The shim's inherited descriptors.
const (
	configFD = 3 // the configuration, as JSON, until EOF
	statusFD = 4 // one line back: "running <pid> <start ticks>" or an error
)

// shimConfig is what the executor tells a shim.
type shimConfig struct {
	// Record is the run's state record, which the shim completes with the
	// processes' ids and writes once the command runs.
	Record   record
	StateDir string
	Command  stageConfig
	LogBytes int64
	// DiskBytes bounds what the command's working directory holds
	// (Limits.DiskBytes).
	DiskBytes int64
	// DeadlineFile holds when the shim ends the run (Limits.Deadline),
	// read again every deadlineCheckEvery; Deadline is its content at the
	// start. StopGrace is the time from its SIGTERM to its SIGKILL.
	DeadlineFile string
	Deadline     time.Time
	StopGrace    time.Duration
}

// stageConfig is what the shim tells the stage.
type stageConfig struct {
	Program    string
	Args       []string
	Env        []string
	Dir        string
	Credential *Credential
	// Procs are the cgroup.procs files that the command joins, in order.
	Procs []string
	// TmpBytes, when not 0, is the size of the command's private /tmp
	// (Limits.TmpBytes); the stage then runs in a mount namespace of its
	// own. Keep are the directories of the server's for the job that
	// stay visible under it (see privatetmp.go).
	TmpBytes int64
	Keep     []string
}

// drainLimit bounds how long the shim reads output after the command and
// its leftovers have ended: a process outside the instance that was handed
// the pipe could otherwise keep it open for ever.
const drainLimit = 5 * time.Second

// runShim supervises one run of an instance and returns the status to exit
// with: the command's, as a shell reports it.
func runShim() int {
	// The command alone decides how to react to these; a handler, unlike an
	// ignored signal, is not inherited by the command.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	// The shim is small and must outlive its command's excesses.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-1000"), 0)
	syscall.CloseOnExec(configFD)
	syscall.CloseOnExec(statusFD)
	status := os.NewFile(statusFD, "status")

	var cfg shimConfig
	if err := readConfig(configFD, &cfg); err != nil {
		fmt.Fprintf(status, "reading the shim's configuration: %v\n", err)
		return 1
	}
	s, err := startRun(cfg)
	if err != nil {
		// The executor cleans up too, unless it has gone meanwhile.
		if c := cfg.Record.cgroups(); len(c.Dirs) > 0 {
			err = errors.Join(err, c.kill(), c.remove())
		}
		if errors.Is(err, ErrDiskLimit) {
			fmt.Fprint(status, diskLimitPrefix)
		}
		fmt.Fprintf(status, "%v\n", err)
		return 1
	}
	fmt.Fprintf(status, "running %d %d\n", s.record.PGID, s.record.LeaderTicks)
	status.Close()
	stop := make(chan struct{})
	go s.watch(stop)
	return s.finish(stop)
}

// shimRun is the shim's view of the run it supervises.
type shimRun struct {
	cfg     shimConfig
	record  record
	cgroups runCgroups
	log     *logWriter
	cmd     *exec.Cmd
	out     *os.File
	pumped  chan error

	// mu guards the ending of the run by the shim's own decision (end)
	// against the reaping of the command, after which its process group
	// id may be another's.
	mu     sync.Mutex
	reaped bool
	// reason says why the shim ended the run, when it did.
	reason string
}

// startRun opens the log, starts the command and records the run.
func startRun(cfg shimConfig) (*shimRun, error) {
	s := &shimRun{cfg: cfg, record: cfg.Record, pumped: make(chan error, 1)}
	s.cgroups = runCgroups{Version: cfg.Record.CgroupVersion, Dirs: cfg.Record.Cgroups}
	log, err := openLogWriter(cfg.Record.LogPath, cfg.LogBytes)
	if err != nil {
		return nil, err
	}
	s.log = log
	if cfg.DiskBytes > 0 {
		if err := checkDisk(cfg.Command.Dir, cfg.DiskBytes); err != nil {
			fmt.Fprintf(log, "capblock: not started: %v\n", err)
			log.Close()
			return nil, err
		}
	}
	out, in, err := os.Pipe()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("creating the output pipe: %w", err)
	}
	stage := cfg.Command
	stage.Procs = s.cgroups.procFiles()
	s.cmd, err = startStage(stage, in)
	in.Close()
	if err != nil {
		out.Close()
		log.Close()
		return nil, err
	}
	s.out = out
	go func() { s.pumped <- pump(log, out) }()

	pid := s.cmd.Process.Pid
	cmdStat, err := readStat(pid)
	if err == nil {
		var self procStat
		self, err = readStat(os.Getpid())
		s.record.PID, s.record.StartTicks = os.Getpid(), self.startTicks
		s.record.PGID, s.record.LeaderTicks = pid, cmdStat.startTicks
	}
	if err == nil {
		err = writeRecord(cfg.StateDir, s.record)
	}
	if err != nil {
		// Unrecorded, the run could not be found again after a crash.
		_ = s.killLeftovers()
		_ = s.cmd.Wait()
		_ = out.SetReadDeadline(time.Now())
		<-s.pumped
		out.Close()
		log.Close()
		return nil, err
	}
	return s, nil
}

// startStage starts the stage, which places itself, becomes the job's user
// and executes the command; it returns once the command runs.
func startStage(cfg stageConfig, out *os.File) (*exec.Cmd, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	defer errR.Close()
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{stageArg0},
		Env:         []string{},
		Dir:         "/",
		Stdout:      out,
		Stderr:      out,
		ExtraFiles:  []*os.File{cfgR, errW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if cfg.TmpBytes > 0 {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS // see privatetmp.go
	}
	err = cmd.Start()
	cfgR.Close()
	errW.Close()
	if err != nil {
		cfgW.Close()
		return nil, fmt.Errorf("starting the command's stage: %w", err)
	}
	err = json.NewEncoder(cfgW).Encode(cfg)
	cfgW.Close()
	// The stage's error pipe closes on exec; anything read from it says
	// why there was none.
	msg, rerr := io.ReadAll(errR)
	if err == nil && rerr == nil && len(msg) == 0 {
		return cmd, nil
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(msg) > 0 {
		return nil, errors.New(strings.TrimSpace(string(msg)))
	}
	return nil, fmt.Errorf("starting the command: %w", errors.Join(err, rerr, errors.New(cmd.ProcessState.String())))
}

// pump copies the command's output to the log until every writer has gone
// or the read deadline passes. Output that the log cannot take (its disk is
// full) is dropped so that the command never blocks on it; the first such
// error is returned.
func pump(log *logWriter, out *os.File) error {
	buf := make([]byte, 64<<10)
	var werr error
	for {
		n, err := out.Read(buf)
		if n > 0 {
			if _, err := log.Write(buf[:n]); err != nil && werr == nil {
				werr = fmt.Errorf("writing the log: %w", err)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
				return werr
			}
			return errors.Join(werr, fmt.Errorf("reading the output: %w", err))
		}
	}
}

// finish waits for the command, ends what it left, records how it ended,
// removes its cgroups and returns its status. It closes stopWatch, which
// ends watch, once the command has ended.
func (s *shimRun) finish(stopWatch chan struct{}) int {
	var problems []error
	pid := s.cmd.Process.Pid
	// 1. Until the command is reaped its pid, and so its group id, cannot
	// be reused: the group can be killed without hitting another process.
	if err := waitExited(pid); err != nil {
		problems = append(problems, err)
	}
	if err := s.killLeftovers(); err != nil {
		problems = append(problems, err)
	}
	s.mu.Lock()
	s.reaped = true
	reason := s.reason
	s.mu.Unlock()
	close(stopWatch)
	_ = s.cmd.Wait()
	code := s.cmd.ProcessState.ExitCode()
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}

	// 2. Take what is left in the pipe.
	_ = s.out.SetReadDeadline(time.Now().Add(drainLimit))
	if err := <-s.pumped; err != nil {
		problems = append(problems, err)
	}
	s.out.Close()
	if reason != "" {
		fmt.Fprintf(s.log, "capblock: %s\n", reason)
	}
	if err := s.log.Close(); err != nil {
		problems = append(problems, fmt.Errorf("closing the log: %w", err))
	}

	// 3. Remove the cgroups and record the end.
	var oom bool
	if len(s.cgroups.Dirs) > 0 {
		oom = s.cgroups.oomKilled()
		if err := s.cgroups.remove(); err != nil {
			problems = append(problems, err)
		}
	}
	writeExit(s.cfg.StateDir, s.record.RunID, code, oom, reason, errors.Join(problems...))
	return code
}

// watch ends the run by the shim's own decision until stopWatch is
// closed: at its deadline, read again from the deadline file every
// deadlineCheckEvery (SIGTERM StopGrace before it, SIGKILL at it), and
// once its working directory holds more than its disk limit (SIGKILL at
// once: a job past its limit must not write a checkpoint on the way out).
func (s *shimRun) watch(stopWatch <-chan struct{}) {
	deadline := s.cfg.Deadline
	termSent := false
	var nextDisk time.Time
	for {
		if s.cfg.DeadlineFile != "" {
			if at, ok := readDeadline(s.cfg.DeadlineFile); ok {
				deadline = at
			}
		}
		now := time.Now()
		wait := deadlineCheckEvery
		if !deadline.IsZero() {
			termAt := deadline.Add(-s.cfg.StopGrace)
			reason := fmt.Sprintf("ended at its deadline, %s (SIGTERM %s before it, SIGKILL at it)", deadline.UTC().Format(time.RFC3339), s.cfg.StopGrace)
			switch {
			case !now.Before(deadline):
				s.end(syscall.SIGKILL, reason)
				return
			case !now.Before(termAt) && !termSent:
				s.end(syscall.SIGTERM, reason)
				termSent = true
			}
			next := termAt
			if termSent {
				next = deadline
			}
			wait = min(wait, next.Sub(now))
		}
		if s.cfg.DiskBytes > 0 {
			if !now.Before(nextDisk) {
				began := time.Now()
				err := checkDisk(s.cfg.Command.Dir, s.cfg.DiskBytes)
				if errors.Is(err, ErrDiskLimit) {
					s.end(syscall.SIGKILL, "killed: "+err.Error())
					return
				}
				nextDisk = time.Now().Add(max(diskCheckEvery, diskCheckShare*time.Since(began)))
			}
			wait = min(wait, time.Until(nextDisk))
		}
		timer := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-stopWatch:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// end sends sig to every process of the run, SIGKILL through
// killLeftovers, unless the command has been reaped; the first reason
// given is the one recorded.
func (s *shimRun) end(sig syscall.Signal, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reaped {
		return
	}
	if s.reason == "" {
		s.reason = reason
	}
	switch {
	case sig == syscall.SIGKILL:
		_ = s.killLeftovers()
	case len(s.cgroups.Dirs) > 0:
		_ = s.cgroups.signal(sig)
	default:
		_ = killGroup(s.cmd.Process.Pid, sig)
	}
}

// killLeftovers ends every process of the run: the cgroups' or, without
// them, the command's process group.
func (s *shimRun) killLeftovers() error {
	if len(s.cgroups.Dirs) > 0 {
		return s.cgroups.kill()
	}
	return killGroup(s.cmd.Process.Pid, syscall.SIGKILL)
}

// runStage joins the run's cgroups, becomes the job's user and executes the
// command, as the process that the shim started; it returns only when that
// fails. It writes why to the inherited descriptor that exec closes.
//
// It joins the cgroups itself, so that the command starts inside them with
// nothing of the shim (whose threads would count against the pids limit,
// and whose memory against the memory limit) ever inside. A process may
// join a cgroup that is at its pids limit, and exec leaves it one thread;
// only a thread that the runtime created between joining and exec would be
// refused.
func runStage() int {
	// The credentials and no_new_privs below belong to the thread that
	// executes the command.
	runtime.LockOSThread()
	syscall.CloseOnExec(configFD)
	syscall.CloseOnExec(statusFD)
	status := os.NewFile(statusFD, "status")
	fail := func(err error) int {
		fmt.Fprintln(status, err)
		return 127
	}
	var cfg stageConfig
	if err := readConfig(configFD, &cfg); err != nil {
		return fail(fmt.Errorf("reading the stage's configuration: %w", err))
	}
	// The shim's low OOM score is not the job's; only a privileged process
	// can lower it again.
	if os.Geteuid() == 0 {
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte("0"), 0); err != nil {
			return fail(fmt.Errorf("resetting the OOM score: %w", err))
		}
	}
	if cfg.TmpBytes > 0 {
		if err := mountPrivateTmp(cfg.TmpBytes, cfg.Keep); err != nil {
			return fail(fmt.Errorf("giving the job a /tmp of its own: %w", err))
		}
	}
	for _, procs := range cfg.Procs {
		if err := writeCgroupFile(filepath.Dir(procs), filepath.Base(procs), strconv.Itoa(os.Getpid())); err != nil {
			return fail(fmt.Errorf("joining cgroup %s: %w", procs, err))
		}
	}
	if c := cfg.Credential; c != nil {
		// A job of another user gains no privilege through a set-user-id
		// program either.
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); errno != 0 {
			return fail(fmt.Errorf("setting no_new_privs: %w", errno))
		}
		if err := syscall.Setgroups([]int{}); err != nil {
			return fail(fmt.Errorf("dropping supplementary groups: %w", err))
		}
		if err := syscall.Setgid(int(c.GID)); err != nil {
			return fail(fmt.Errorf("setting group %d: %w", c.GID, err))
		}
		if err := syscall.Setuid(int(c.UID)); err != nil {
			return fail(fmt.Errorf("setting user %d: %w", c.UID, err))
		}
	}
	if cfg.Dir != "" {
		if err := os.Chdir(cfg.Dir); err != nil {
			return fail(fmt.Errorf("entering the working directory: %w", err))
		}
	}
	err := syscall.Exec(cfg.Program, cfg.Args, cfg.Env)
	return fail(fmt.Errorf("executing %s: %w", cfg.Program, err))
}

// prSetNoNewPrivs is PR_SET_NO_NEW_PRIVS of prctl(2).
const prSetNoNewPrivs = 38

// readConfig decodes the JSON value that arrives on the inherited
// descriptor fd, and closes it.
func readConfig(fd int, v any) error {
	f := os.NewFile(uintptr(fd), "config")
	defer f.Close()
	return json.NewDecoder(f).Decode(v)
}
