package executor

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLogCapturesStdoutAndStderrAcrossRuns(t *testing.T) {
	e, _ := newTestExecutor(t)
	script := writeScript(t, `echo "out $1"; echo "err $1" >&2`)
	s := spec(t, "logs", script, "first")
	start(t, e, s)
	nextExit(t, e)
	s.Command[1] = "second"
	start(t, e, s)
	nextExit(t, e)

	got, _ := readAll(t, s.LogPath)
	if diff := cmp.Diff("out first\nerr first\nout second\nerr second\n", got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestExitStatusIsReported(t *testing.T) {
	tests := map[string]struct {
		script string
		want   Exit
	}{
		"success":   {script: "exit 0", want: Exit{Code: 0}},
		"failure":   {script: "exit 7", want: Exit{Code: 7}},
		"not found": {script: "/nonexistent/bin", want: Exit{Code: 127}},
		"SIGUSR1":   {script: "kill -USR1 $$", want: Exit{Code: 138, Signaled: true, Signal: "SIGUSR1"}},
		"SIGKILL":   {script: "kill -KILL $$", want: Exit{Code: 137, Signaled: true, Signal: "SIGKILL"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTestExecutor(t)
			start(t, e, spec(t, "j", writeScript(t, tc.script)))
			tc.want.JobID = "j"
			if diff := cmp.Diff(tc.want, nextExit(t, e), exitOpts); diff != "" {
				t.Errorf("exit (-want +got):\n%s", diff)
			}
			if got := e.Running(); len(got) != 0 {
				t.Errorf("Running after the exit = %+v, want none", got)
			}
		})
	}
}

func TestStopSendsSIGTERMFirst(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	script := writeScript(t, `trap 'echo term >"$1/term"; exit 0' TERM
touch "$1/ready"
sleep 1000 &
wait`)
	inst := start(t, e, spec(t, "j", script, dir))
	eventually(t, "the script to be ready", func() bool { return fileExists(filepath.Join(dir, "ready")) })

	if err := e.Stop("j", 0, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := e.Stop("j", 0, time.Minute); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	want := Exit{JobID: "j", RunID: inst.RunID, Code: 0}
	if diff := cmp.Diff(want, nextExit(t, e), cmpopts.EquateErrors()); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	if !fileExists(filepath.Join(dir, "term")) {
		t.Error("the script's SIGTERM trap did not run")
	}
	if err := e.Stop("j", 0, time.Minute); err != nil {
		t.Errorf("Stop after the exit: %v", err)
	}
	if runningPID(inst.PID) {
		t.Errorf("pid %d still runs", inst.PID)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	script := writeScript(t, `trap '' TERM
touch "$1/ready"
sleep 1000`)
	start(t, e, spec(t, "j", script, dir))
	eventually(t, "the script to be ready", func() bool { return fileExists(filepath.Join(dir, "ready")) })

	const grace = 300 * time.Millisecond
	stopped := time.Now()
	if err := e.Stop("j", 0, grace); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	x := nextExit(t, e)
	if took := time.Since(stopped); took < grace {
		t.Errorf("killed after %v, before the grace of %v", took, grace)
	}
	if diff := cmp.Diff(Exit{JobID: "j", Code: 137, Signaled: true, Signal: "SIGKILL"}, x, exitOpts); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
}

func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	// The background sleep ignores SIGTERM, so only the group's SIGKILL
	// after the leader has gone can end it.
	script := writeScript(t, `(trap '' TERM; exec sleep 1000) &
echo $! >"$1/child"
wait`)
	start(t, e, spec(t, "j", script, dir))
	child := readPID(t, filepath.Join(dir, "child"))
	killOnCleanup(t, child)

	if err := e.Stop("j", 0, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := Exit{JobID: "j", Code: 143, Signaled: true, Signal: "SIGTERM"}
	if diff := cmp.Diff(want, nextExit(t, e), exitOpts); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	eventually(t, fmt.Sprintf("the child sleep %d to end", child), func() bool { return !runningPID(child) })
}

func TestExitEndsLeftoverProcesses(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	script := writeScript(t, `sleep 1000 &
echo $! >"$1/child"
exit 3`)
	start(t, e, spec(t, "j", script, dir))
	child := readPID(t, filepath.Join(dir, "child"))
	killOnCleanup(t, child)

	if x := nextExit(t, e); x.Code != 3 || x.Err != nil {
		t.Errorf("exit = %+v, want code 3", x)
	}
	eventually(t, fmt.Sprintf("the leftover sleep %d to end", child), func() bool { return !runningPID(child) })
}

func TestStartRejects(t *testing.T) {
	e, _ := newTestExecutor(t)
	tests := map[string]Spec{
		"no job id":         {Command: []string{"true"}, LogPath: "/tmp/x.log"},
		"no command":        {JobID: "j", LogPath: "/tmp/x.log"},
		"no log path":       {JobID: "j", Command: []string{"true"}},
		"unknown command":   spec(t, "j", "capblock-no-such-command"),
		"missing file":      spec(t, "j", "./no-such-file"),
		"missing directory": {JobID: "j", Command: []string{"true"}, Dir: "/nonexistent", LogPath: filepath.Join(t.TempDir(), "x.log")},
		"bad environment":   {JobID: "j", Command: []string{"true"}, Env: map[string]string{"A=B": "c"}, LogPath: filepath.Join(t.TempDir(), "x.log")},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			if inst, err := e.Start(s); err == nil {
				killOnCleanup(t, inst.PID)
				t.Fatalf("Start succeeded, want an error")
			}
		})
	}
	if got := e.Running(); len(got) != 0 {
		t.Errorf("Running = %+v, want none", got)
	}
}

func TestConcurrentStarts(t *testing.T) {
	e, _ := newTestExecutor(t)
	script := writeScript(t, `exit "$1"`)
	const n = 16
	want := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		job := "job-" + strconv.Itoa(i)
		want[job] = i % 4
		wg.Go(func() {
			inst, err := e.Start(spec(t, job, script, strconv.Itoa(i%4)))
			if err != nil {
				errs <- err
				return
			}
			killOnCleanup(t, inst.PID)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Start: %v", err)
	}
	got := map[string]int{}
	for range n {
		x := nextExit(t, e)
		if _, dup := got[x.JobID]; dup {
			t.Errorf("second exit for %s", x.JobID)
		}
		got[x.JobID] = x.Code
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exit codes (-want +got):\n%s", diff)
	}
}

func TestConcurrentStartsOfOneInstance(t *testing.T) {
	e, _ := newTestExecutor(t)
	s := spec(t, "same", "sleep", "1000")
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, refused := 0, 0
	for range n {
		wg.Go(func() {
			inst, err := e.Start(s)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				killOnCleanup(t, inst.PID)
				started++
			case errors.Is(err, ErrAlreadyRunning):
				refused++
			default:
				t.Errorf("Start: %v", err)
			}
		})
	}
	wg.Wait()
	if started != 1 || refused != n-1 {
		t.Fatalf("started %d and refused %d, want 1 and %d", started, refused, n-1)
	}
	if err := e.Stop("same", 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if x := nextExit(t, e); x.Signal != "SIGTERM" {
		t.Errorf("exit = %+v, want SIGTERM", x)
	}
}

// A stop that comes right after the start must reach the command, not only
// the shim that is about to start it.
func TestStopRightAfterStart(t *testing.T) {
	e, _ := newTestExecutor(t)
	for i := range 20 {
		job := "j" + strconv.Itoa(i)
		start(t, e, spec(t, job, "sleep", "1000"))
		if err := e.Stop(job, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		want := Exit{JobID: job, Code: 143, Signaled: true, Signal: "SIGTERM"}
		if diff := cmp.Diff(want, nextExit(t, e), exitOpts); diff != "" {
			t.Fatalf("exit (-want +got):\n%s", diff)
		}
	}
}
