package slurmtest

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
	"testing"
	"time"
)

// markerEnv names the cluster's folder in the environment of each daemon
// it starts, and so of each slurmstepd: the processes that outlive their
// daemon (a job's step is a session of its own) are found by it.
const markerEnv = "CAPBLOCK_SLURMTEST"

// process is one daemon, a child in its own process group.
type process struct {
	name string
	log  string // its standard output and error
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited and been reaped
	err  error
}

// run starts program as the daemon name, its output in <dir>/<name>.out.
// It dies with the test process (Pdeathsig), even when a test times out
// and no cleanup runs.
func (c *Cluster) run(name, program string, args ...string) error {
	path, err := lookPath(program)
	if err != nil {
		return err
	}
	p := &process{name: name, log: filepath.Join(c.dir, name+".out"), done: make(chan struct{})}
	out, err := os.Create(p.log)
	if err != nil {
		return fmt.Errorf("creating %s's log: %w", name, err)
	}
	defer out.Close()
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = c.dir
	p.cmd.Env = append(os.Environ(), append(c.Env(), markerEnv+"="+c.dir)...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// stop cancels the cluster's jobs, kills every daemon's process group,
// the last started first (the cluster's state is thrown away, so nothing
// needs a clean shutdown), reaps them, and kills what their jobs left.
func (c *Cluster) stop() {
	if len(c.procs) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.Run(ctx, "", "scancel", "--partition="+c.Partition); err == nil {
			c.poll(ctx, "waiting for the jobs to end", func() (bool, error) {
				out, err := c.Run(ctx, "", "squeue", "--noheader", "--format=%A")
				return err == nil && len(bytes.TrimSpace(out)) == 0, nil
			})
		}
		cancel()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	c.killStrays()
}

// killStrays kills the processes that the cluster's daemons or its
// commands started and that are still running: slurmstepd and jobs'
// processes, which Slurm puts in sessions of their own. They are found
// by the cluster's folder in their environment, so that no other
// process is touched.
func (c *Cluster) killStrays() {
	marks := [][]byte{[]byte(markerEnv + "=" + c.dir + "\x00"), []byte("SLURM_CONF=" + c.Conf + "\x00")}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, m := range marks {
			if bytes.Contains(env, m) {
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// exited returns an error naming the first daemon that has exited.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v (log in %s)", p.name, p.err, p.log)
		default:
		}
	}
	return nil
}

// poll calls done every 100 ms until it reports true or an error, a
// daemon exits, or ctx ends: Slurm gives no event to wait on for these
// states.
func (c *Cluster) poll(ctx context.Context, what string, done func() (bool, error)) error {
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
		if err := c.exited(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// logTails logs the end of each daemon's log, to see why a test failed.
func (c *Cluster) logTails(tb testing.TB) {
	logs := []string{filepath.Join(c.dir, "slurmctld.log"), filepath.Join(c.dir, "munge", "munged.log")}
	for _, p := range c.procs {
		logs = append(logs, p.log)
		if n, ok := strings.CutPrefix(p.name, "slurmd-"); ok {
			logs = append(logs, filepath.Join(c.dir, "slurmd-"+n+".log"))
		}
	}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			continue
		}
		tb.Logf("last lines of %s:\n%s", path, tail(b, 20))
	}
}

// tail returns the last n lines of b.
func tail(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// freePorts returns n loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
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
