// Package testproc runs the daemons of the clusters that tests start
// (internal/kubetest, internal/slurmtest): each a child in a process group
// of its own, with its output in a log file, killed with the test process
// even when a test times out and no cleanup runs, and killed and reaped,
// the last started first, when the cluster stops.
package testproc

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one daemon.
type Proc struct {
	Name string
	Log  string // path of its standard output and error
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and been reaped
	err  error         // why it exited, once done is closed
}

// Pid is the daemon's process id (and its process group's).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Group is the daemons of one cluster, in start order.
type Group struct {
	procs []*Proc
}

// Start starts program with args as the daemon name, in dir with env, its
// output in log. It dies with the test process (Pdeathsig).
func (g *Group) Start(name, program, dir, log string, env []string, args ...string) (*Proc, error) {
	p := &Proc{Name: name, Log: log, done: make(chan struct{})}
	out, err := os.Create(log)
	if err != nil {
		return nil, fmt.Errorf("creating %s's log: %w", name, err)
	}
	defer out.Close()
	p.cmd = exec.Command(program, args...)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	g.procs = append(g.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Procs returns the daemons in start order.
func (g *Group) Procs() []*Proc { return g.procs }

// Stop kills every daemon's process group, the last started first (a
// test cluster's state is thrown away, so nothing needs a clean
// shutdown), and reaps them.
func (g *Group) Stop() {
	for i := len(g.procs) - 1; i >= 0; i-- {
		p := g.procs[i]
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Exited returns an error naming the first daemon that has exited.
func (g *Group) Exited() error {
	for _, p := range g.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v (log in %s)", p.Name, p.err, p.Log)
		default:
		}
	}
	return nil
}

// Poll calls done every 100 ms until it reports true or an error, a
// daemon exits, or ctx ends: the clusters give no event to wait on for
// the states tests wait for.
func (g *Group) Poll(ctx context.Context, what string, done func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if err := g.Exited(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// Tail returns the last n lines of b.
func Tail(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// FreePorts returns n loopback TCP ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so they differ
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// KillUnder kills, with SIGKILL, every process of this machine (but the
// calling one) whose working directory or command line names a path
// under dir: the processes a test started there that outlive what
// started them (a job's shim and its script, left running by design
// when their server stops, for the next server to adopt). Tests call it
// from a cleanup, before dir is removed. It reports how many it killed.
func KillUnder(dir string) int {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	self := os.Getpid()
	killed := 0
	for range 3 { // a killed shim's children are seen at the next pass
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return killed
		}
		found := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			if !namesUnder(pid, dir) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				found++
			}
		}
		killed += found
		if found == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return killed
}

// namesUnder reports whether process pid works in dir or names a path
// under it in its command line.
func namesUnder(pid int, dir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	if cwd, err := os.Readlink(proc + "/cwd"); err == nil && strings.HasPrefix(cwd+"/", dir) {
		return true
	}
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if bytes.Contains(arg, []byte(dir)) {
			return true
		}
	}
	return false
}
