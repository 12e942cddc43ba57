package executor

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// exitOpts compares exits in tests that do not follow run ids.
var exitOpts = cmp.Options{cmpopts.EquateErrors(), cmpopts.IgnoreFields(Exit{}, "RunID")}

// waitLimit bounds every wait in these tests; it is generous because they
// run real processes under the race detector on small, busy machines
// (CI runs every package at once on two cores).
const waitLimit = time.Minute

// newTestExecutor returns an Executor on a fresh state directory, closed at
// the end of the test.
func newTestExecutor(t *testing.T, opts ...Option) (*Executor, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	e, err := New(dir, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e, dir
}

// writeScript writes a shell script to a temporary directory and returns its
// path.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// spec returns a Spec for job with rank 0 that logs to a temporary file.
func spec(t *testing.T, job string, command ...string) Spec {
	return Spec{JobID: job, Command: command, LogPath: filepath.Join(t.TempDir(), "logs", job+".log")}
}

// start starts an instance and makes sure that all its processes are gone
// when the test ends, whatever happened to the executor.
func start(t *testing.T, e *Executor, s Spec) Instance {
	t.Helper()
	inst, err := e.Start(s)
	if err != nil {
		t.Fatalf("Start(%s): %v", s.JobID, err)
	}
	killOnCleanup(t, inst.PID)
	if len(inst.Cgroups) > 0 {
		c := runCgroups{Dirs: inst.Cgroups}
		t.Cleanup(func() {
			if c.exists() {
				c.kill()
				c.remove()
			}
		})
	}
	return inst
}

// withoutCgroups makes an Executor run as where cgroups are not available.
func withoutCgroups() Option {
	return func(o *options) { o.noCgroups = true }
}

// withCgroup2At makes an Executor use the cgroup2 file system mounted at
// dir, such as the controller-less one of a machine that mounts version 1
// controllers too.
func withCgroup2At(dir string) Option {
	return func(o *options) { o.cgroup2At = dir }
}

// needCgroups skips a test where e cannot give instances cgroups, except in
// CI, which runs as root and where it is a failure.
func needCgroups(t *testing.T, e *Executor) {
	t.Helper()
	if iso := e.Isolation(); iso.CgroupVersion == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cgroups are not available in CI: %s", iso.Reason)
		}
		t.Skipf("needs cgroups (run as root): %s", iso.Reason)
	}
}

// killOnCleanup kills the process group led by pid at the end of the test if
// that process, checked by its start time, still runs.
func killOnCleanup(t *testing.T, pid int) {
	t.Helper()
	st, err := readStat(pid)
	if err != nil {
		return
	}
	t.Cleanup(func() {
		if alive(pid, st.startTicks) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
}

// nextExit waits for the next exit from e.
func nextExit(t *testing.T, e *Executor) Exit {
	t.Helper()
	select {
	case x, ok := <-e.Exits():
		if !ok {
			t.Fatal("Exits closed")
		}
		return x
	case <-time.After(waitLimit):
		t.Fatalf("no exit within %v; running: %+v", waitLimit, e.Running())
	}
	return Exit{}
}

// eventually polls cond until it holds or the wait limit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readPID reads a pid that a script wrote to path, once it is there.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// runningPID reports whether pid runs at all, without a start time to check.
func runningPID(pid int) bool {
	st, err := readStat(pid)
	return err == nil && st.state != 'Z' && st.state != 'X'
}
