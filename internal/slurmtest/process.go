package slurmtest

import (
	"bytes"
	"capblock/internal/testproc"
	"context"
	"os"
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

// run starts program as the daemon name, its output in <dir>/<name>.out,
// with the cluster's folder in its environment (markerEnv).
func (c *Cluster) run(name, program string, args ...string) error {
	path, err := lookPath(program)
	if err != nil {
		return err
	}
	_, err = c.procs.Start(name, path, c.dir, filepath.Join(c.dir, name+".out"),
		append(os.Environ(), append(c.Env(), markerEnv+"="+c.dir)...), args...)
	return err
}

// stop cancels the cluster's jobs, kills every daemon's process group,
// the last started first (the cluster's state is thrown away, so nothing
// needs a clean shutdown), reaps them, and kills what their jobs left.
func (c *Cluster) stop() {
	if len(c.procs.Procs()) > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.Run(ctx, "", "scancel", "--partition="+c.Partition); err == nil {
			c.poll(ctx, "waiting for the jobs to end", func() (bool, error) {
				out, err := c.Run(ctx, "", "squeue", "--noheader", "--format=%A")
				return err == nil && len(bytes.TrimSpace(out)) == 0, nil
			})
		}
		cancel()
	}
	c.procs.Stop()
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

// poll waits for done (testproc.Group.Poll).
func (c *Cluster) poll(ctx context.Context, what string, done func() (bool, error)) error {
	return c.procs.Poll(ctx, what, done)
}

// logTails logs the end of each daemon's log, to see why a test failed.
func (c *Cluster) logTails(tb testing.TB) {
	logs := []string{filepath.Join(c.dir, "slurmctld.log"), filepath.Join(c.dir, "munge", "munged.log")}
	for _, p := range c.procs.Procs() {
		logs = append(logs, p.Log)
		if n, ok := strings.CutPrefix(p.Name, "slurmd-"); ok {
			logs = append(logs, filepath.Join(c.dir, "slurmd-"+n+".log"))
		}
	}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			continue
		}
		tb.Logf("last lines of %s:\n%s", path, testproc.Tail(b, 20))
	}
}
