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
		fmt.Fprintf(status, "%v\n", err)
		return 1
	}
	fmt.Fprintf(status, "running %d %d\n", s.record.PGID, s.record.LeaderTicks)
	status.Close()
	return s.finish()
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
// removes its cgroups and returns its status.
func (s *shimRun) finish() int {
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
	writeExit(s.cfg.StateDir, s.record.RunID, code, oom, errors.Join(problems...))
	return code
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
