package executor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newIsolatedExecutor returns an Executor whose instances get cgroups, or
// skips the test where they cannot (see needCgroups).
func newIsolatedExecutor(t *testing.T, opts ...Option) (*Executor, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	e, err := New(dir, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	needCgroups(t, e)
	return e, dir
}

// escapees is a job that starts processes that leave its process group,
// and then runs its own command: a setsid child, which notes a SIGTERM in
// the file "term" of the job's directory, and a double fork whose
// grandchild setsid's too and ignores SIGTERM. Each runs a sleep for a time
// that no other process on the machine uses, by which the test finds them.
func escapees(t *testing.T, then string) (script string, sleeps []string) {
	stamp := time.Now().UnixNano() % 1e6
	sleeps = []string{fmt.Sprintf("4242.%06d", stamp), fmt.Sprintf("4343.%06d", stamp)}
	script = writeScript(t, fmt.Sprintf(`setsid sh -c 'trap "touch \"$0/term\"; exit" TERM; sleep %s & wait' "$1" &
( setsid sh -c 'trap "" TERM; exec sleep %s' & ) &
%s`, sleeps[0], sleeps[1], then))
	return script, sleeps
}

// stopped ends escapees on SIGTERM once the escapee has noted its own, as
// a job would wait for its workers to save their work.
const stopped = `trap 'i=0; while [ ! -e "$1/term" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; exit 143' TERM
wait`

// sleepsRunning lists the pids of running "sleep <arg>" processes.
func sleepsRunning(args ...string) []int {
	var pids []int
	dir, _ := os.ReadDir("/proc")
	for _, d := range dir {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || !runningPID(pid) {
			continue
		}
		for _, a := range args {
			if string(b) == "sleep\x00"+a+"\x00" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// waitForEscapees waits until both escaping sleeps run in the instance's
// cgroup.
func waitForEscapees(t *testing.T, inst Instance, sleeps []string) {
	t.Helper()
	eventually(t, "the escaping sleeps to run", func() bool { return len(sleepsRunning(sleeps...)) == 2 })
	procs, err := readPIDs(filepath.Join(inst.Cgroups[0], "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range sleepsRunning(sleeps...) {
		if st, _ := readStat(pid); st.pgrp == inst.PGID {
			t.Errorf("sleep %d is in the instance's process group, want it to have left", pid)
		}
		if !strings.Contains(fmt.Sprint(procs), strconv.Itoa(pid)) {
			t.Errorf("sleep %d is not in cgroup %s (%v)", pid, inst.Cgroups[0], procs)
		}
	}
}

// checkAllGone checks that nothing of the instance is left: no cgroup and
// no escaped sleep.
func checkAllGone(t *testing.T, inst Instance, sleeps []string) {
	t.Helper()
	for _, dir := range inst.Cgroups {
		if fileExists(dir) {
			t.Errorf("cgroup %s is still there", dir)
		}
	}
	if left := sleepsRunning(sleeps...); len(left) > 0 {
		t.Errorf("escaped sleeps %v still run", left)
	}
}

func TestStopEndsProcessesThatLeftTheGroup(t *testing.T) {
	for name, opts := range cgroupVersions(t) {
		t.Run(name, func(t *testing.T) {
			e, _ := newIsolatedExecutor(t, opts...)
			dir := t.TempDir()
			script, sleeps := escapees(t, stopped)
			inst := start(t, e, spec(t, "j", script, dir))
			waitForEscapees(t, inst, sleeps)

			if err := e.Stop("j", 0, 300*time.Millisecond); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			want := Exit{JobID: "j", Code: 143, Signaled: true, Signal: "SIGTERM"}
			if diff := cmp.Diff(want, nextExit(t, e), exitOpts); diff != "" {
				t.Errorf("exit (-want +got):\n%s", diff)
			}
			if !fileExists(filepath.Join(dir, "term")) {
				t.Error("the process that left the group got no SIGTERM")
			}
			checkAllGone(t, inst, sleeps)
		})
	}
}

func TestExitEndsProcessesThatLeftTheGroup(t *testing.T) {
	for name, opts := range cgroupVersions(t) {
		t.Run(name, func(t *testing.T) {
			e, _ := newIsolatedExecutor(t, opts...)
			dir := t.TempDir()
			script, sleeps := escapees(t, `while [ ! -e "$1/go" ]; do sleep 0.02; done
exit 3`)
			inst := start(t, e, spec(t, "j", script, dir))
			waitForEscapees(t, inst, sleeps)

			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(Exit{JobID: "j", Code: 3}, nextExit(t, e), exitOpts); diff != "" {
				t.Errorf("exit (-want +got):\n%s", diff)
			}
			checkAllGone(t, inst, sleeps)
		})
	}
}

// cgroupVersions are the cgroup hierarchies this machine can test: the
// default one, and a cgroup2 mount beside version 1 controllers where
// there is one.
func cgroupVersions(t *testing.T) map[string][]Option {
	out := map[string][]Option{"default": nil}
	if fileExists("/sys/fs/cgroup/unified/cgroup.procs") {
		out["cgroup2 beside v1"] = []Option{withCgroup2At("/sys/fs/cgroup/unified")}
	}
	return out
}

func TestAdoptedIsolatedInstanceEndsWhole(t *testing.T) {
	first, stateDir := newIsolatedExecutor(t)
	dir := t.TempDir()
	script, sleeps := escapees(t, stopped)
	inst := start(t, first, spec(t, "j", script, dir))
	waitForEscapees(t, inst, sleeps)
	crash(t, first)

	second := reopen(t, stateDir)
	adopted, err := second.Adopt()
	if err != nil || len(adopted) != 1 {
		t.Fatalf("Adopt = %+v, %v; want the instance", adopted, err)
	}
	if diff := cmp.Diff(inst.Cgroups, adopted[0].Cgroups); diff != "" {
		t.Errorf("adopted cgroups (-want +got):\n%s", diff)
	}
	if err := second.Stop("j", 0, 300*time.Millisecond); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := Exit{JobID: "j", RunID: inst.RunID, Code: 143, Signaled: true, Signal: "SIGTERM", Adopted: true}
	if diff := cmp.Diff(want, nextExit(t, second), exitOpts); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	if !fileExists(filepath.Join(dir, "term")) {
		t.Error("the process that left the group got no SIGTERM")
	}
	checkAllGone(t, inst, sleeps)
}

// A command that prints 200 MB leaves its cap on disk, holding the end of
// what it printed; offsets name positions in the whole output.
func TestLogCapKeepsTheNewestOutput(t *testing.T) {
	e, _ := newTestExecutor(t)
	const lines = 22222222 // seq -w pads to 8 digits: 9 bytes a line
	const printed = 9 * lines
	const capBytes = 1 << 20
	s := spec(t, "j", "seq", "-w", "0", strconv.Itoa(lines-1))
	s.Limits.LogBytes = capBytes
	start(t, e, s)

	// Follow the log while it is written: every piece is the output at its
	// offset, and the follower reaches the end.
	followed := make(chan error, 1)
	go func() {
		var offset int64
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			b, next, err := ReadLog(s.LogPath, offset, 64<<10)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				followed <- err
				return
			}
			if from := next - int64(len(b)); from < offset || string(b) != string(stream(from, int64(len(b)))) {
				followed <- fmt.Errorf("ReadLog(%d) returned %d bytes from %d that are not the output there", offset, len(b), from)
				return
			}
			if offset = next; offset == printed {
				followed <- nil
				return
			}
		}
		followed <- fmt.Errorf("the follower stopped at %d of %d", offset, printed)
	}()
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit = %+v, want 0", x)
	}
	if err := <-followed; err != nil {
		t.Error(err)
	}

	fi, err := os.Stat(s.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > capBytes || fi.Mode().Perm() != 0o600 {
		t.Errorf("log: %d bytes, mode %v; want at most %d bytes, mode 0600", fi.Size(), fi.Mode().Perm(), capBytes)
	}
	got, from := readAll(t, s.LogPath)
	const kept = capBytes - logHeaderSize
	if from != printed-kept || int64(len(got)) != kept || got != string(stream(from, kept)) {
		t.Errorf("log holds %d bytes from %d, want the last %d of %d bytes of output", len(got), from, kept, printed)
	}
	if !strings.HasSuffix(got, "22222221\n") {
		t.Errorf("log ends with %q, want the last line", got[max(len(got)-20, 0):])
	}
}

func TestPIDsLimitStopsAForkLoop(t *testing.T) {
	e, _ := newIsolatedExecutor(t)
	needLimit(t, e.Isolation().PIDs, "pids")
	dir := t.TempDir()
	const limit = 16
	// dash gives up at the first fork that fails; count says how far it got.
	script := writeScript(t, `i=0
while [ $i -lt 200 ]; do
	sleep 1000 &
	i=$((i+1))
	echo $i >"$1/count"
done`)
	s := spec(t, "j", script, dir)
	s.Limits.PIDs = limit
	inst := start(t, e, s)

	x := nextExit(t, e)
	b, _ := os.ReadFile(filepath.Join(dir, "count"))
	forked, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if forked == 0 || forked >= limit {
		t.Errorf("the loop forked %d processes besides itself, want fewer than %d", forked, limit)
	}
	if x.Code == 0 {
		t.Errorf("exit = %+v, want the shell's failure", x)
	}
	if log, _ := readAll(t, s.LogPath); !strings.Contains(log, "fork") {
		t.Errorf("log = %q, want the shell's complaint about fork", log)
	}
	checkAllGone(t, inst, nil)
}

func TestMemoryLimitEndsAProcessThatAllocatesPastIt(t *testing.T) {
	e, _ := newIsolatedExecutor(t)
	needLimit(t, e.Isolation().Memory, "memory")
	// awk doubles a string until it holds 256 MiB, four times the limit
	// (and no more, should the limit fail).
	s := spec(t, "j", "awk", `BEGIN { s = "x"; for (i = 0; i < 28; i++) s = s s; print length(s) }`)
	s.Limits.MemoryBytes = 64 << 20
	inst := start(t, e, s)

	want := Exit{JobID: "j", Code: 137, Signaled: true, Signal: "SIGKILL", OOMKilled: true}
	if diff := cmp.Diff(want, nextExit(t, e), exitOpts); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	checkAllGone(t, inst, nil)
}

func needLimit(t *testing.T, ok bool, controller string) {
	t.Helper()
	if !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s controller in CI", controller)
		}
		t.Skipf("needs the %s controller", controller)
	}
}

// needRoot skips a test that only root can run, saying why it needs root,
// except in CI, which runs as root.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run as root, %s", why)
		}
		t.Skipf("needs root, %s", why)
	}
}

func TestCredentialRunsTheCommandAsAnotherUser(t *testing.T) {
	needRoot(t, "to run a command as another user")
	e, stateDir := newTestExecutor(t)
	// A root file that the job could reach but not read.
	shared, err := os.MkdirTemp("", "capblock-shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	secret := filepath.Join(shared, "secret")
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := spec(t, "j", "sh", "-c", `id -u; id -g
grep -E '^(Groups|NoNewPrivs):' /proc/self/status
cat "$1" || echo "cannot read the secret"
kill -0 $PPID || echo "cannot signal the shim"
ls "$2" || echo "cannot list the state directory"`, "sh", secret, stateDir)
	s.Dir = shared
	s.Credential = &Credential{UID: 65534, GID: 65534}
	inst := start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit = %+v, want 0", x)
	}

	log, _ := readAll(t, s.LogPath)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line != "" && !strings.Contains(line, ": ") || strings.HasPrefix(line, "Groups:") || strings.HasPrefix(line, "NoNewPrivs:") {
			got = append(got, strings.Join(strings.Fields(line), " "))
		}
	}
	want := []string{"65534", "65534", "Groups:", "NoNewPrivs: 1", "cannot read the secret", "cannot signal the shim", "cannot list the state directory"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the job saw (-want +got):\n%s\nlog:\n%s", diff, log)
	}
	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Dir(s.LogPath)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("log directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	if inst.ShimPID == inst.PID {
		t.Errorf("the shim and the command have one pid, %d", inst.PID)
	}
}

func TestWithoutCgroupsInstancesRunInProcessGroups(t *testing.T) {
	e, _ := newTestExecutor(t, withoutCgroups())
	if iso := e.Isolation(); iso.CgroupVersion != 0 || iso.Memory || iso.PIDs || iso.Reason == "" {
		t.Errorf("Isolation = %+v, want none, with a reason", iso)
	}
	dir := t.TempDir()
	script := writeScript(t, `(trap '' TERM; exec sleep 1000) &
echo $! >"$1/child"
wait`)
	// Limits that need cgroups are not applied, as Isolation says.
	s := spec(t, "j", script, dir)
	s.Limits = Limits{MemoryBytes: 1 << 30, PIDs: 100}
	inst := start(t, e, s)
	if len(inst.Cgroups) != 0 {
		t.Errorf("instance has cgroups %v", inst.Cgroups)
	}
	child := readPID(t, filepath.Join(dir, "child"))
	killOnCleanup(t, child)

	if err := e.Stop("j", 0, time.Minute); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := Exit{JobID: "j", Code: 143, Signaled: true, Signal: "SIGTERM"}
	if diff := cmp.Diff(want, nextExit(t, e), exitOpts); diff != "" {
		t.Errorf("exit (-want +got):\n%s", diff)
	}
	eventually(t, "the child in the group to end", func() bool { return !runningPID(child) })
}

func TestRequireCgroups(t *testing.T) {
	if _, err := New(t.TempDir(), withoutCgroups(), RequireCgroups()); !errors.Is(err, ErrNoCgroups) {
		t.Errorf("New without cgroups = %v, want ErrNoCgroups", err)
	}
	// The cgroup2 mount beside version 1 controllers has no memory
	// controller to give.
	needRoot(t, "to use cgroups")
	if !fileExists("/sys/fs/cgroup/unified/cgroup.procs") {
		t.Skip("no cgroup2 mount beside version 1 controllers")
	}
	e, _ := newIsolatedExecutor(t, withCgroup2At("/sys/fs/cgroup/unified"), RequireCgroups())
	if e.Isolation().Memory {
		t.Skip("the cgroup2 mount has a memory controller")
	}
	s := spec(t, "j", "true")
	s.Limits.MemoryBytes = 1 << 30
	if inst, err := e.Start(s); !errors.Is(err, ErrLimitUnsupported) {
		killOnCleanup(t, inst.PID)
		t.Errorf("Start with a memory limit = %v, want ErrLimitUnsupported", err)
	}
}

// The shim ignores what would end a process group, and hands neither that
// nor its low OOM score to the command.
func TestShimIgnoresTerminationSignals(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	script := writeScript(t, `cat /proc/self/oom_score_adj >"$1/oom"
grep SigIgn /proc/self/status >"$1/ignored"
while [ ! -e "$1/go" ]; do sleep 0.02; done
exit 5`)
	inst := start(t, e, spec(t, "j", script, dir))
	eventually(t, "the job to be ready", func() bool { return fileExists(filepath.Join(dir, "ignored")) })
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if err := syscall.Kill(inst.ShimPID, sig); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Exit{JobID: "j", Code: 5}, nextExit(t, e), exitOpts); diff != "" {
		t.Errorf("exit after signalling the shim (-want +got):\n%s", diff)
	}
	if got := readTrimmed(filepath.Join(dir, "oom")); got != "0" {
		t.Errorf("the command's oom_score_adj = %q, want 0", got)
	}
	// The shell ignores nothing itself when it starts a script.
	if got := strings.Fields(readTrimmed(filepath.Join(dir, "ignored"))); len(got) != 2 || got[1] != "0000000000000000" {
		t.Errorf("the command's ignored signals: %q, want none", got)
	}
}

func TestShimOOMScore(t *testing.T) {
	needRoot(t, "to lower an OOM score")
	// Lowering an OOM score takes CAP_SYS_RESOURCE, which a container's
	// root may lack.
	var caps uint64
	for _, line := range strings.Split(readTrimmed("/proc/self/status"), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	const capSysResource = 24
	if caps&(1<<capSysResource) == 0 {
		t.Skip("needs CAP_SYS_RESOURCE to lower an OOM score")
	}
	e, _ := newTestExecutor(t)
	inst := start(t, e, spec(t, "j", "sleep", "1000"))
	if got := readTrimmed(fmt.Sprintf("/proc/%d/oom_score_adj", inst.ShimPID)); got != "-1000" {
		t.Errorf("the shim's oom_score_adj = %q, want -1000", got)
	}
	if err := e.Stop("j", 0, 0); err != nil {
		t.Fatal(err)
	}
	nextExit(t, e)
}

// A shim killed outright leaves its command running; the executor ends it
// and says that the status is unknown.
func TestKilledShimLeavesNothing(t *testing.T) {
	for name, opts := range map[string][]Option{"cgroups": nil, "process group": {withoutCgroups()}} {
		t.Run(name, func(t *testing.T) {
			e, _ := newTestExecutor(t, opts...)
			dir := t.TempDir()
			script := writeScript(t, `sleep 1000 &
echo $! >"$1/child"
wait`)
			inst := start(t, e, spec(t, "j", script, dir))
			child := readPID(t, filepath.Join(dir, "child"))
			killOnCleanup(t, child)
			if err := syscall.Kill(inst.ShimPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			x := nextExit(t, e)
			if x.Code != -1 || !errors.Is(x.Err, ErrExitUnknown) {
				t.Errorf("exit = %+v, want an unknown status", x)
			}
			for _, pid := range []int{inst.PID, child} {
				eventually(t, fmt.Sprintf("process %d of the instance to end", pid), func() bool { return !runningPID(pid) })
			}
			checkAllGone(t, inst, nil)
		})
	}
}

func TestProbeTellsWhatNewWillDo(t *testing.T) {
	e, _ := newTestExecutor(t)
	if diff := cmp.Diff(e.Isolation(), Probe()); diff != "" {
		t.Errorf("Probe (-New's +got):\n%s", diff)
	}
}
