package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// waitForGo is a job that says it is ready, waits for the test to create a
// "go" file and exits with the status given as its second argument.
const waitForGo = `touch "$1/ready"
while [ ! -e "$1/go" ]; do sleep 0.02; done
exit "$2"`

// crash simulates a server crash: the executor lets go of its processes
// without stopping them. In-process they stay its children, which it reaps,
// but it no longer reports or records anything.
func crash(t *testing.T, e *Executor) {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case x, ok := <-e.Exits():
		if ok {
			t.Fatalf("closed executor reported %+v", x)
		}
	case <-time.After(waitLimit):
		t.Fatal("Exits not closed by Close")
	}
}

func reopen(t *testing.T, stateDir string) *Executor {
	t.Helper()
	e, err := New(stateDir)
	if err != nil {
		t.Fatalf("New after the crash: %v", err)
	}
	e.pollEvery = 20 * time.Millisecond
	t.Cleanup(func() { e.Close() })
	return e
}

func TestAdoptWatchesARunningInstance(t *testing.T) {
	first, stateDir := newTestExecutor(t)
	dir := t.TempDir()
	inst := start(t, first, spec(t, "j", writeScript(t, waitForGo), dir, "5"))
	eventually(t, "the job to be ready", func() bool { return fileExists(filepath.Join(dir, "ready")) })
	crash(t, first)

	second := reopen(t, stateDir)
	adopted, err := second.Adopt()
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	inst.Adopted = true
	if diff := cmp.Diff([]Instance{inst}, adopted, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("adopted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(adopted, second.Running()); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}
	if again, err := second.Adopt(); err != nil || len(again) != 0 {
		t.Errorf("second Adopt = %+v, %v; want nothing new", again, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := Exit{JobID: "j", RunID: inst.RunID, Code: 5, Adopted: true}
	if diff := cmp.Diff(want, nextExit(t, second), cmpopts.EquateErrors()); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	eventually(t, "the state records to be removed", func() bool {
		files, _ := filepath.Glob(filepath.Join(stateDir, "*.*"))
		return len(files) == 0
	})
}

func TestAdoptReportsAnInstanceThatEndedMeanwhile(t *testing.T) {
	first, stateDir := newTestExecutor(t)
	dir := t.TempDir()
	inst := start(t, first, spec(t, "j", writeScript(t, waitForGo), dir, "4"))
	// The run ends when its shim does, a moment after the command.
	st, err := readStat(inst.ShimPID)
	if err != nil {
		t.Fatal(err)
	}
	crash(t, first)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the job to end", func() bool { return !alive(inst.ShimPID, st.startTicks) })

	second := reopen(t, stateDir)
	adopted, err := second.Adopt()
	if err != nil || len(adopted) != 0 {
		t.Fatalf("Adopt = %+v, %v; want nothing running", adopted, err)
	}
	want := Exit{JobID: "j", RunID: inst.RunID, Code: 4, Adopted: true}
	if diff := cmp.Diff(want, nextExit(t, second), cmpopts.EquateErrors()); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
}

func TestStopAnAdoptedInstance(t *testing.T) {
	first, stateDir := newTestExecutor(t)
	dir := t.TempDir()
	polite := writeScript(t, `touch "$1/polite"; sleep 1000 & wait`)
	stubborn := writeScript(t, `trap '' TERM; touch "$1/stubborn"; sleep 1000`)
	start(t, first, spec(t, "polite", polite, dir))
	start(t, first, spec(t, "stubborn", stubborn, dir))
	eventually(t, "the jobs to be ready", func() bool {
		return fileExists(filepath.Join(dir, "polite")) && fileExists(filepath.Join(dir, "stubborn"))
	})
	crash(t, first)

	second := reopen(t, stateDir)
	if adopted, err := second.Adopt(); err != nil || len(adopted) != 2 {
		t.Fatalf("Adopt = %+v, %v; want both jobs", adopted, err)
	}
	for _, job := range []string{"polite", "stubborn"} {
		if err := second.Stop(job, 0, 300*time.Millisecond); err != nil {
			t.Fatalf("Stop(%s): %v", job, err)
		}
	}
	got := map[string]Exit{}
	for range 2 {
		x := nextExit(t, second)
		got[x.JobID] = x
	}
	want := map[string]Exit{
		// The shim recorded how the script ended.
		"polite": {JobID: "polite", Code: 143, Signaled: true, Signal: "SIGTERM", Adopted: true},
		// SIGKILL ended the script; the shim, which it does not reach,
		// recorded that.
		"stubborn": {JobID: "stubborn", Code: 137, Signaled: true, Signal: "SIGKILL", Adopted: true},
	}
	if diff := cmp.Diff(want, got, exitOpts); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
}

func TestAdoptChecksThatThePIDWasNotReused(t *testing.T) {
	e, stateDir := newTestExecutor(t)
	// Another process now has the recorded pid: this test, with a start
	// time that differs from the recorded one.
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	reused := record{
		RunID: "REUSED", JobID: "reused", PID: os.Getpid(), PGID: os.Getpid(),
		StartTicks: self.startTicks + 1, BootID: e.bootID,
	}
	// And a process of an earlier boot that happens to match pid and start
	// time now.
	sleeper := exec.Command("sleep", "1000")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	st, err := readStat(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rebooted := record{
		RunID: "REBOOTED", JobID: "rebooted", PID: sleeper.Process.Pid, PGID: sleeper.Process.Pid,
		StartTicks: st.startTicks, BootID: "an-earlier-boot",
	}
	for _, r := range []record{reused, rebooted} {
		if err := writeRecord(e.stateDir, r); err != nil {
			t.Fatal(err)
		}
	}

	adopted, err := e.Adopt()
	if err != nil || len(adopted) != 0 {
		t.Fatalf("Adopt = %+v, %v; want nothing running", adopted, err)
	}
	for range 2 {
		x := nextExit(t, e)
		if x.Code != -1 || !errors.Is(x.Err, ErrExitUnknown) || !x.Adopted {
			t.Errorf("exit = %+v, want an unknown exit of an adopted instance", x)
		}
		if err := e.Stop(x.JobID, 0, 0); err != nil {
			t.Errorf("Stop(%s): %v", x.JobID, err)
		}
	}
	if !runningPID(sleeper.Process.Pid) {
		t.Error("the unrelated sleep was killed")
	}
	eventually(t, "the records to be removed", func() bool {
		files, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
		return len(files) == 0
	})
}

func TestAdoptRemovesUnreadableRecords(t *testing.T) {
	e, stateDir := newTestExecutor(t)
	path := filepath.Join(stateDir, "EMPTY.json")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Adopt(); err == nil {
		t.Error("Adopt of an empty record succeeded, want an error")
	}
	if fileExists(path) {
		t.Error("the empty record is still there")
	}
}

func TestNewRefusesAStateDirInUse(t *testing.T) {
	_, stateDir := newTestExecutor(t)
	if _, err := New(stateDir); !errors.Is(err, ErrStateDirInUse) {
		t.Fatalf("second New = %v, want ErrStateDirInUse", err)
	}
}

// TestCrashHelper is not a test: TestAdoptAfterARealCrash runs the test
// binary with it as a server that starts a job and dies without a word.
func TestCrashHelper(t *testing.T) {
	stateDir, jobDir := os.Getenv("EXECUTOR_CRASH_STATE"), os.Getenv("EXECUTOR_CRASH_JOB")
	if stateDir == "" {
		t.Skip("helper process for TestAdoptAfterARealCrash")
	}
	e, err := New(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{JobID: "j", Command: []string{filepath.Join(jobDir, "job.sh"), jobDir, "6"}, LogPath: filepath.Join(jobDir, "log")}
	inst, err := e.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(inst.PID, inst.ShimPID)
	os.Exit(0)
}

// After a real crash the job is no longer the executor's child: its end can
// only be seen in /proc, and its status only in the shim's exit file.
func TestAdoptAfterARealCrash(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	jobDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(jobDir, "job.sh"), []byte("#!/bin/sh\n"+waitForGo+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	server := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$")
	server.Env = append(os.Environ(), "EXECUTOR_CRASH_STATE="+stateDir, "EXECUTOR_CRASH_JOB="+jobDir)
	out, err := server.Output()
	if err != nil {
		t.Fatalf("crashing server: %v\n%s", err, out)
	}
	var pid, shim int
	if _, err := fmt.Sscan(string(out), &pid, &shim); err != nil {
		t.Fatalf("crashing server said %q", out)
	}
	killOnCleanup(t, pid)
	if st, err := readStat(shim); err != nil || st.ppid == os.Getpid() {
		t.Fatalf("shim %d: stat %+v, %v; want it running and not our child", shim, st, err)
	}

	e := reopen(t, stateDir)
	adopted, err := e.Adopt()
	if err != nil || len(adopted) != 1 || adopted[0].PID != pid {
		t.Fatalf("Adopt = %+v, %v; want pid %d", adopted, err, pid)
	}
	if err := os.WriteFile(filepath.Join(jobDir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := Exit{JobID: "j", RunID: adopted[0].RunID, Code: 6, Adopted: true}
	if diff := cmp.Diff(want, nextExit(t, e), cmpopts.EquateErrors()); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
}
