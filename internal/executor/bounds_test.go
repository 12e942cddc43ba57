package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// needPrivateTmp skips a test where e cannot give instances a /tmp of
// their own, except in CI, which runs as root and where it is a failure.
func needPrivateTmp(t *testing.T, e *Executor) {
	t.Helper()
	if iso := e.Isolation(); !iso.PrivateTmp {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a private /tmp is not available in CI: %s", iso.TmpReason)
		}
		t.Skipf("needs a private /tmp (run as root): %s", iso.TmpReason)
	}
}

// readWholeLog reads an instance's log.
func readWholeLog(t *testing.T, path string) string {
	t.Helper()
	b, _, err := ReadLog(path, 0, 1<<20)
	if err != nil {
		t.Fatalf("reading the log: %v", err)
	}
	return string(b)
}

// TestJobTmpIsBoundedAndPrivate: an instance with a tmp limit, run as
// a user of its own, writes to /tmp until it is full: it gets ENOSPC at
// the limit, the host's /tmp, /dev/shm and /var/tmp never see its files,
// and it can write to all three, which share the limit.
func TestJobTmpIsBoundedAndPrivate(t *testing.T) {
	e, _ := newTestExecutor(t)
	needPrivateTmp(t, e)
	stamp := fmt.Sprintf("capblock-test-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		for _, d := range []string{"/tmp", "/dev/shm", "/var/tmp"} {
			os.Remove(filepath.Join(d, stamp))
		}
	})
	script := fmt.Sprintf(`for d in /tmp /dev/shm /var/tmp; do
  [ -d "$d" ] || continue
  echo small > "$d/%[1]s" && echo "wrote $d"
done
echo "tmpdir $TMPDIR"
dd if=/dev/zero of=/tmp/%[1]s.fill bs=1048576 count=32 2>&1
echo "dd exit $?"
rm /tmp/%[1]s.fill
dd if=/dev/zero of=/dev/shm/%[1]s.fill bs=1048576 count=32 2>&1
echo "shm dd exit $?"
echo kept > "$PWD/kept" && echo "wrote the working directory"
ls "$(dirname "$PWD")" >/dev/null 2>&1 || echo "cannot list above it"
`, stamp)
	// The working directory is under /tmp, as a test's or a demo's jobs
	// directory may be: it stays the host's.
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s := spec(t, "tmp", "/bin/sh", "-c", script)
	s.Dir = dir
	s.Credential = &Credential{UID: 65534, GID: 65534}
	s.Limits = Limits{TmpBytes: 8 << 20}
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit = %+v, want 0\n%s", x, readWholeLog(t, s.LogPath))
	}
	log := readWholeLog(t, s.LogPath)
	for _, want := range []string{"wrote /tmp\n", "tmpdir /tmp\n", "No space left on device", "dd exit 1\n", "shm dd exit 1\n",
		"wrote the working directory\n", "cannot list above it\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, log)
		}
	}
	for _, d := range []string{"/tmp", "/dev/shm", "/var/tmp"} {
		if fileExists(filepath.Join(d, stamp)) || fileExists(filepath.Join(d, stamp+".fill")) {
			t.Errorf("the job's file reached the host's %s", d)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kept")); err != nil || string(b) != "kept\n" {
		t.Errorf("the job's working directory under /tmp holds %q, %v; want what the job wrote", b, err)
	}
	t.Logf("the job's output:\n%s", log)
}

// TestJobTmpRefusedWhereItCannotBeApplied: an executor that must
// contain its instances refuses a tmp limit it cannot apply; another
// runs the instance on the host's /tmp, as Isolation says.
func TestJobTmpRefusedWhereItCannotBeApplied(t *testing.T) {
	e, _ := newTestExecutor(t, withoutPrivateTmp())
	if iso := e.Isolation(); iso.PrivateTmp || iso.TmpReason == "" {
		t.Fatalf("Isolation = %+v, want no private /tmp, with a reason", iso)
	}
	s := spec(t, "tmp", "true")
	s.Limits = Limits{TmpBytes: 8 << 20}
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 {
		t.Errorf("exit = %+v, want 0", x)
	}
	strict, err := New(filepath.Join(t.TempDir(), "state"), RequireCgroups(), withoutPrivateTmp())
	if errors.Is(err, ErrNoCgroups) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cgroups are not available in CI: %v", err)
		}
		t.Skipf("a strict executor needs cgroups (run as root): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer strict.Close()
	if _, err := strict.Start(s); !errors.Is(err, ErrLimitUnsupported) || !strings.Contains(err.Error(), "/tmp") {
		t.Errorf("strict Start = %v, want ErrLimitUnsupported naming /tmp", err)
	}
}

// withoutPrivateTmp makes an Executor run as where mount namespaces
// cannot be used.
func withoutPrivateTmp() Option {
	return func(o *options) { o.noPrivateTmp = true }
}

// TestDiskLimitEndsTheJob: a job that writes past its working
// directory's disk limit is killed, with the reason on its exit and in
// its log, and refused at its next start while the directory is full.
func TestDiskLimitEndsTheJob(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	s := spec(t, "disk", "/bin/sh", "-c", `head -c 16777216 /dev/zero > big; echo written; exec sleep 1000`)
	s.Dir = dir
	s.Limits = Limits{DiskBytes: 4 << 20}
	start(t, e, s)
	x := nextExit(t, e)
	if x.Code != 137 || !x.Signaled || !strings.Contains(x.Reason, "disk") || !strings.Contains(x.Reason, "4.0 MiB") {
		t.Errorf("exit = %+v, want a SIGKILL for the disk limit of 4.0 MiB", x)
	}
	killed := regexp.MustCompile(`capblock: killed: the job's working directory is past its disk limit: ` + regexp.QuoteMeta(dir) +
		` holds [0-9.]+ MiB on disk, and its limit is 4\.0 MiB; the job cannot run again until it holds less\n$`)
	if log := readWholeLog(t, s.LogPath); !killed.MatchString(log) {
		t.Errorf("the log does not say why the job ended:\n%s", log)
	}

	_, err := e.Start(s)
	if !errors.Is(err, ErrDiskLimit) || !strings.Contains(err.Error(), dir+" holds ") || !strings.Contains(err.Error(), "MiB on disk, and its limit is 4.0 MiB") {
		t.Fatalf("Start of a job whose directory is full = %v, want ErrDiskLimit saying how full", err)
	}
	if log := readWholeLog(t, s.LogPath); !strings.Contains(log, "capblock: not started: the job's working directory is past its disk limit") {
		t.Errorf("the log does not say why the job did not start:\n%s", log)
	}
	if err := os.Remove(filepath.Join(dir, "big")); err != nil {
		t.Fatal(err)
	}
	s.Command = []string{"true"}
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Reason != "" {
		t.Errorf("exit once the directory holds less = %+v, want 0", x)
	}
}

// TestJobDiskUsageCountsWhatIsOnDisk: allocated blocks, each file once, no
// link followed.
func TestJobDiskUsageCountsWhatIsOnDisk(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(path string, n int) {
		if err := os.WriteFile(path, make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "big"), 8<<20)
	before, err := dirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "a"), 1<<20)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "a-again")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	got, err := dirUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if added := got - before; added < 1<<20 || added > 1<<20+64<<10 {
		t.Errorf("dirUsage grew by %d bytes, want about 1 MiB (one file of 1 MiB, linked twice; a link out; a sparse file)", added)
	}
}

// deadlineJob ignores SIGTERM, notes it, and runs a sleep of a length no
// other process uses, by which the test finds it; where the run has
// cgroups, a sleep in a session of its own too, which only they end.
func deadlineJob(t *testing.T, dir string) (script string, sleeps []string) {
	stamp := time.Now().UnixNano() % 1e6
	sleeps = []string{fmt.Sprintf("4545.%06d", stamp), fmt.Sprintf("4646.%06d", stamp)}
	script = writeScript(t, fmt.Sprintf(`trap 'touch "%s/term"' TERM
setsid sleep %s &
echo started > "%s/started"
while :; do sleep %s; done`, dir, sleeps[0], dir, sleeps[1]))
	return script, sleeps
}

// TestJobDeadlineMovesWithSetDeadline: a deadline moved later before it comes does
// not end the instance; moved close, it does, SIGTERM then SIGKILL, with
// the reason on its exit.
func TestJobDeadlineMovesWithSetDeadline(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	script, sleeps := deadlineJob(t, dir)
	s := spec(t, "dl", script)
	s.Limits = Limits{Deadline: time.Now().Add(2 * time.Second), StopGrace: time.Second}
	inst := start(t, e, s)
	eventually(t, "the job to start", func() bool { return fileExists(filepath.Join(dir, "started")) })
	if err := e.SetDeadline("dl", 0, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the first deadline, and a check of the file
	if !runningPID(inst.PID) {
		t.Fatal("the job ended at the deadline it had been moved from")
	}
	if fileExists(filepath.Join(dir, "term")) {
		t.Fatal("the job got SIGTERM for the deadline it had been moved from")
	}
	// Far enough that the shim reads it (every second) before its SIGTERM
	// is due, which leaves the job its grace to note it.
	at := time.Now().Add(3 * time.Second)
	if err := e.SetDeadline("dl", 0, at); err != nil {
		t.Fatal(err)
	}
	x := nextExit(t, e)
	if x.Code != 137 || !strings.Contains(x.Reason, "deadline, "+at.UTC().Format(time.RFC3339)) {
		t.Errorf("exit = %+v, want SIGKILL at the deadline", x)
	}
	if time.Now().Before(at) {
		t.Errorf("the job ended before its deadline %s", at)
	}
	if !fileExists(filepath.Join(dir, "term")) {
		t.Error("the job got no SIGTERM before its deadline")
	}
	if len(inst.Cgroups) > 0 {
		if left := sleepsRunning(sleeps...); len(left) > 0 {
			t.Errorf("the job's sleeps %v outlived it", left)
		}
	}
	if err := e.SetDeadline("dl", 0, time.Now()); err != nil {
		t.Errorf("SetDeadline of an instance that ended = %v, want nil", err)
	}
}

// TestDeadlineServerHelper is not a test: TestJobEndsAtItsDeadlineWithItsServerGone
// runs the test binary with it as a server that starts a job with a
// deadline, says so and waits to be killed.
func TestDeadlineServerHelper(t *testing.T) {
	stateDir, jobDir := os.Getenv("EXECUTOR_DEADLINE_STATE"), os.Getenv("EXECUTOR_DEADLINE_JOB")
	if stateDir == "" {
		t.Skip("helper process for TestJobEndsAtItsDeadlineWithItsServerGone")
	}
	deadline, err := time.Parse(time.RFC3339Nano, os.Getenv("EXECUTOR_DEADLINE_AT"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{JobID: "j", Command: []string{filepath.Join(jobDir, "job.sh")}, LogPath: filepath.Join(jobDir, "log"),
		Limits: Limits{Deadline: deadline, StopGrace: 2 * time.Second}}
	inst, err := e.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(inst.PID, inst.ShimPID, len(inst.Cgroups))
	select {} // until killed
}

// TestJobEndsAtItsDeadlineWithItsServerGone: a job whose server is killed
// (SIGKILL) and never comes back is ended by its shim at its deadline,
// SIGTERM and then SIGKILL of every process it started; the shim exits,
// and nothing of the run is left. A new executor on the state directory
// reports how it ended, and why.
func TestJobEndsAtItsDeadlineWithItsServerGone(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	jobDir := t.TempDir()
	script, sleeps := deadlineJob(t, jobDir)
	if err := os.Rename(script, filepath.Join(jobDir, "job.sh")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	server := exec.Command(os.Args[0], "-test.run=^TestDeadlineServerHelper$")
	server.Env = append(os.Environ(), "EXECUTOR_DEADLINE_STATE="+stateDir, "EXECUTOR_DEADLINE_JOB="+jobDir,
		"EXECUTOR_DEADLINE_AT="+deadline.Format(time.RFC3339Nano))
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	var pid, shim, cgroups int
	if _, err := fmt.Fscan(out, &pid, &shim, &cgroups); err != nil {
		server.Process.Kill()
		server.Wait()
		t.Fatalf("the server said no pids: %v", err)
	}
	killOnCleanup(t, pid)
	shimStat, err := readStat(shim)
	if err != nil {
		t.Fatal(err)
	}
	// 1. The server dies for good.
	if err := server.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	server.Wait()
	eventually(t, "the job to start", func() bool { return fileExists(filepath.Join(jobDir, "started")) })
	if !alive(shim, shimStat.startTicks) || !runningPID(pid) {
		t.Fatal("the job or its shim ended with the server, before the deadline")
	}

	// 2. Its shim ends the job at the deadline, and exits.
	eventually(t, "the shim to exit", func() bool { return !alive(shim, shimStat.startTicks) })
	if time.Now().Before(deadline) {
		t.Errorf("the job ended %s before its deadline", time.Until(deadline))
	}
	if !fileExists(filepath.Join(jobDir, "term")) {
		t.Error("the job got no SIGTERM before its deadline")
	}
	if runningPID(pid) {
		t.Errorf("the job's process %d outlived its deadline", pid)
	}
	if cgroups > 0 {
		if left := sleepsRunning(sleeps...); len(left) > 0 {
			t.Errorf("the job's sleeps %v outlived its deadline", left)
		}
	} else if left := sleepsRunning(sleeps[1]); len(left) > 0 {
		t.Errorf("the job's sleep %v outlived its deadline", left)
	}
	if log := readWholeLog(t, filepath.Join(jobDir, "log")); !strings.Contains(log, "capblock: ended at its deadline") {
		t.Errorf("the log does not say why the job ended:\n%s", log)
	}

	// 3. A server that comes back learns how it ended.
	e := reopen(t, stateDir)
	if adopted, err := e.Adopt(); err != nil || len(adopted) != 0 {
		t.Fatalf("Adopt = %+v, %v; want nothing running", adopted, err)
	}
	x := nextExit(t, e)
	if x.Code != 137 || !x.Adopted || !strings.Contains(x.Reason, "deadline, "+deadline.UTC().Format(time.RFC3339)) || x.Err != nil {
		t.Errorf("exit = %+v, want SIGKILL at the deadline", x)
	}
}
