package slurm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A session is one long-lived `scontrol` reading commands on its
// standard input (scontrol's interactive mode), so that a reservation
// command costs one RPC to slurmctld, not a process (fork, exec, reading
// slurm.conf, loading plugins) and then the RPC.
//
// Each command is followed by two markers of its own number n:
// "capblock-end-n", which scontrol refuses as an unknown keyword on its
// standard error ("invalid keyword: capblock-end-n"), and
// "show hostnames capblock-end-n", which it prints, locally, on its
// standard output. scontrol runs its input in order, one line after the
// other, so what a stream carries before its marker is the command's,
// whatever the order in which the two pipes are read: a failed
// command's error is its own, never the next one's. Neither marker asks
// slurmctld anything.
//
// Debian's scontrol reads its input with readline, which echoes each
// line it reads on the standard output after its prompt "scontrol: ",
// even from a pipe (TERM=dumb: a long line is echoed scrolled, on one
// line all the same). Lines that begin with the prompt are those echoes
// and are dropped; the output of the commands sent never begins so.
// A session's start checks that scontrol answers so (startSession), and
// the backend runs a process per call where it does not.
//
// Success: scontrol's interactive mode has no exit status per command,
// so a command failed when it wrote on its standard error, or when a
// show found nothing ("Reservation x not found", "No reservations in
// the system", which scontrol prints on its standard output with an
// exit status of 1, as the process path reports); a create succeeded
// only when scontrol said "Reservation created:", an update only when
// it said "Reservation updated.".

// Defaults of Config's session settings.
const (
	// DefaultSessions is how many scontrol sessions run at most, one
	// command in each at a time.
	DefaultSessions = 4
	// DefaultCommandTimeout bounds one command of a session: past it
	// the session's scontrol is killed (and started again for the next
	// command), and the command reported failed.
	DefaultCommandTimeout = time.Minute
	// sessionCommands is how many commands a session runs before it is
	// replaced: readline keeps every line read in its history.
	sessionCommands = 5000
	// sessionProbeTimeout bounds a session's first command, which asks
	// slurmctld nothing.
	sessionProbeTimeout = 10 * time.Second
)

// Values of Config.Scontrol.
const (
	ScontrolSession = "session"
	ScontrolProcess = "process"
)

// sessionPrompt is scontrol's prompt, before the echo of each line.
const sessionPrompt = "scontrol: "

// errRefused is the error of a command a session ran that failed.
var errRefused = errors.New("failed")

// errSessionLost is the error of a command whose session ended or timed
// out before the command's answer came: it may have applied.
var errSessionLost = errors.New("scontrol's session ended before the command's answer (it may have applied)")

// errNotSent is the error of a command that could not be written to
// its session's scontrol, which had ended: no scontrol read it.
var errNotSent = errors.New("scontrol's session had ended before the command was sent")

// sessions is a pool of scontrol sessions. It is safe for concurrent
// use.
type sessions struct {
	path    string
	env     []string
	timeout time.Duration
	idle    chan *session     // sessions waiting for a command
	slots   chan struct{}     // one per session running
	mu      sync.Mutex        // guards live and closed
	live    map[*session]bool // every session running
	closed  bool
}

func newSessions(path string, env []string, n int, timeout time.Duration) *sessions {
	return &sessions{path: path, env: env, timeout: timeout, idle: make(chan *session, n), slots: make(chan struct{}, n),
		live: map[*session]bool{}}
}

// run runs one scontrol command (its words, none holding a space or a
// quote) in a session, and returns what it printed on its standard
// output, the echoes left out.
func (p *sessions) run(ctx context.Context, args []string) (string, error) {
	s, err := p.take(ctx)
	if err != nil {
		return "", err
	}
	out, stderr, err := s.do(ctx, args, p.timeout)
	p.give(s, err == nil)
	if errors.Is(err, errNotSent) {
		// Its scontrol had ended, unseen, before the command could be
		// written: no scontrol read it, so it runs in another.
		if s, err = p.take(ctx); err != nil {
			return "", err
		}
		out, stderr, err = s.do(ctx, args, p.timeout)
		p.give(s, err == nil)
	}
	command := "scontrol " + strings.Join(args, " ")
	if err != nil {
		return "", fmt.Errorf("%s: %w", command, err)
	}
	if failed(args, out, stderr) {
		msg := strings.TrimSpace(stderr + " " + out)
		return "", &commandError{command: command, stderr: msg, err: errRefused}
	}
	return out, nil
}

// failed reports whether a command a session ran failed, from what it
// printed (see the top of this file).
func failed(args []string, stdout, stderr string) bool {
	if strings.TrimSpace(stderr) != "" {
		return true
	}
	switch {
	case len(args) >= 2 && args[0] == "create":
		return !strings.Contains(stdout, "Reservation created:")
	case len(args) >= 2 && args[0] == "update" && strings.HasPrefix(args[1], "ReservationName="):
		return !strings.Contains(stdout, "Reservation updated.")
	case len(args) >= 1 && args[0] == "show":
		for _, line := range strings.Split(stdout, "\n") {
			line = strings.TrimSpace(line)
			if line == "No reservations in the system" || strings.HasPrefix(line, "Reservation ") && strings.HasSuffix(line, " not found") {
				return true
			}
		}
	}
	return false
}

// take returns an idle session, else starts one if fewer than the
// pool's bound run, else waits for one to be idle.
func (p *sessions) take(ctx context.Context) (*session, error) {
	for {
		var s *session
		select {
		case s = <-p.idle:
		default:
			select {
			case s = <-p.idle:
			case p.slots <- struct{}{}:
				s, err := p.start()
				if err != nil {
					<-p.slots
					return nil, err
				}
				return s, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.alive() {
			return s, nil
		}
		p.give(s, false) // ended while idle: another takes its slot
	}
}

// give puts s back after a command; a session that failed or has run
// its share of commands is stopped, and its slot freed.
func (p *sessions) give(s *session, ok bool) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if ok && !closed && s.n < sessionCommands && s.alive() {
		p.idle <- s
		return
	}
	p.stop(s)
	<-p.slots
}

func (p *sessions) start() (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the Slurm backend is closed")
	}
	s, err := startSession(p.path, p.env, p.timeout)
	if err != nil {
		return nil, err
	}
	p.live[s] = true
	return s, nil
}

func (p *sessions) stop(s *session) {
	s.kill()
	p.mu.Lock()
	delete(p.live, s)
	p.mu.Unlock()
}

func (p *sessions) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// close stops every session; commands running are reported lost.
func (p *sessions) close() {
	p.mu.Lock()
	p.closed = true
	live := make([]*session, 0, len(p.live))
	for s := range p.live {
		live = append(live, s)
	}
	p.mu.Unlock()
	for _, s := range live {
		s.kill()
	}
}

// session is one scontrol process and the lines it writes.
type session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout chan string   // complete lines, the echoes left out; closed at EOF
	stderr chan string   // complete lines; closed at EOF
	exited chan struct{} // closed once the process has ended
	quit   chan struct{} // closed by kill: the readers stop sending
	once   sync.Once
	n      int // commands sent, and the last marker's number
}

// startSession starts scontrol in interactive mode, one record a line
// (oneliner), and checks that it answers as the session reads it.
func startSession(path string, env []string, timeout time.Duration) (*session, error) {
	cmd := exec.Command(path)
	// readline's behaviour, whatever the host's terminal and inputrc:
	// one line echoed per line read.
	cmd.Env = append(withoutKeys(env, "TERM=", "INPUTRC="), "TERM=dumb", "INPUTRC=/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting scontrol's session: %w", err)
	}
	s := &session{cmd: cmd, stdin: stdin, stdout: make(chan string, 64), stderr: make(chan string, 64),
		exited: make(chan struct{}), quit: make(chan struct{})}
	var reading sync.WaitGroup
	reading.Add(2)
	go readLines(stdout, s.stdout, true, s.quit, &reading)
	go readLines(stderr, s.stderr, false, s.quit, &reading)
	go func() {
		reading.Wait() // Wait closes the pipes: read them to their end first
		_ = cmd.Wait()
		close(s.exited)
	}()
	ctx := context.Background()
	out, errOut, err := s.do(ctx, []string{"oneliner"}, sessionProbeTimeout)
	if err == nil && (strings.TrimSpace(out) != "" || strings.TrimSpace(errOut) != "") {
		err = fmt.Errorf("scontrol answered %q, %q to oneliner, expected nothing", out, errOut)
	}
	if err != nil {
		s.kill()
		return nil, fmt.Errorf("scontrol's interactive mode does not answer as expected (readline echoing each line): %w", err)
	}
	return s, nil
}

// withoutKeys is env without the variables that begin with one of
// prefixes.
func withoutKeys(env []string, prefixes ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, p := range prefixes {
			keep = keep && !strings.HasPrefix(kv, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// readLines sends r's complete lines to lines, without the echoes when
// echoes is set, and closes lines at the end of r. A partial line (the
// prompt, waiting for the next input) stays in the reader until its
// end comes.
func readLines(r io.Reader, lines chan<- string, echoes bool, quit <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return // a partial last line is a prompt, or the process's end
		}
		line = strings.TrimSuffix(line, "\n")
		if echoes && strings.HasPrefix(line, sessionPrompt) {
			continue
		}
		select {
		case lines <- line:
		case <-quit:
			_, _ = io.Copy(io.Discard, br) // to the process's end
			return
		}
	}
}

// do sends one command and its markers, and collects what the command
// printed on either stream up to its marker. Past timeout, or ctx's
// end, or at the process's end, the session is killed and the command
// reported lost: it may have applied.
func (s *session) do(ctx context.Context, args []string, timeout time.Duration) (stdout, stderr string, err error) {
	s.n++
	mark := "capblock-end-" + strconv.Itoa(s.n)
	input := strings.Join(args, " ") + "\n" + mark + "\nshow hostnames " + mark + "\n"
	if _, err := io.WriteString(s.stdin, input); err != nil {
		// The pipe has no reader: scontrol has ended. A line of up to
		// PIPE_BUF bytes is written whole or not at all, and a longer
		// one was not read to its end, so no scontrol ran it.
		s.kill()
		return "", "", fmt.Errorf("%w: %v", errNotSent, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var out, errOut strings.Builder
	outDone, errDone := false, false
	stdoutLines, stderrLines := s.stdout, s.stderr
	for !outDone || !errDone {
		select {
		case line, ok := <-stdoutLines:
			switch {
			case !ok:
				s.kill()
				return "", "", fmt.Errorf("%w: scontrol ended: %s", errSessionLost, strings.TrimSpace(errOut.String()))
			case line == mark:
				outDone, stdoutLines = true, nil
			default:
				out.WriteString(line)
				out.WriteByte('\n')
			}
		case line, ok := <-stderrLines:
			switch {
			case !ok:
				s.kill()
				return "", "", fmt.Errorf("%w: scontrol ended: %s", errSessionLost, strings.TrimSpace(errOut.String()))
			case line == "invalid keyword: "+mark:
				errDone, stderrLines = true, nil
			default:
				errOut.WriteString(line)
				errOut.WriteByte('\n')
			}
		case <-timer.C:
			s.kill()
			return "", "", fmt.Errorf("%w: no answer in %v; scontrol killed, a new one runs the next command", errSessionLost, timeout)
		case <-ctx.Done():
			s.kill()
			return "", "", fmt.Errorf("%w: %w", errSessionLost, ctx.Err())
		}
	}
	return out.String(), errOut.String(), nil
}

// alive reports whether the session's process still runs.
func (s *session) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// kill ends the session's process and waits for it to be reaped.
func (s *session) kill() {
	s.once.Do(func() {
		close(s.quit)
		_ = s.stdin.Close()
		_ = s.cmd.Process.Kill()
	})
	<-s.exited
}
