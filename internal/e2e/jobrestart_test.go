package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// TestJobsSurviveServerCrash kills the server (SIGKILL) while a job runs;
// the restarted server adopts the running process instead of starting it
// again, reports the job running, and records its success when it ends.
func TestJobsSurviveServerCrash(t *testing.T) {
	c := startCrashable(t)
	e, dir := c.env, c.dir
	b := c.activeBlock(1)
	marks := filepath.Join(dir, "marks")
	script := writeScript(t, `echo "$$" >> "`+marks+`.pids"
i=0
while [ $i -lt 100 ]; do i=$((i+1)); sleep 0.03; done
echo done >> "`+marks+`.done"
`)
	var j job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{script}}, &j); code != 201 {
		t.Fatalf("creating the job: %d", code)
	}
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	for deadline := time.Now().Add(10 * time.Second); readLines(marks+".pids") == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}

	// The crash, while the job runs.
	e2 := c.crashAndRestart()

	if got := waitJob(t, e2, j.ID, func(job) bool { return true }); got.State != "running" && got.State != "succeeded" {
		t.Fatalf("after the restart the job is %q", got.State)
	}
	got := waitJob(t, e2, j.ID, func(j job) bool { return j.State == "succeeded" })
	if got.Restarts != 0 {
		t.Errorf("restarts %d", got.Restarts)
	}
	if pids := readLines(marks + ".pids"); len(pids) != 1 {
		t.Fatalf("the job started %d times (%v): it ran twice", len(pids), pids)
	}
	if done := readLines(marks + ".done"); len(done) != 1 {
		t.Fatalf("the job finished %d times", len(done))
	}
}

func readLines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// TestLostJobRestarts: a job recorded as running whose processes never
// started (the server died in between) is found on the next start and
// started again, from its checkpoint directory.
func TestLostJobRestarts(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	b, _ := e.buy(e.exact(searchQuery("l4.1x", 1, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "lost-1")
	e.advance(2 * time.Hour)
	marker := filepath.Join(t.TempDir(), "ran")
	script := writeScript(t, `echo "$CAPBLOCK_RESTART_COUNT" > "`+marker+`"`)
	lost := core.Job{ID: "job-lost", Team: e.team, BlockID: b.ID, Command: []string{script}, InstanceCount: 1,
		State: core.JobRunning, Run: 1, CreatedAt: t0, StartedAt: t0.Add(2 * time.Hour)}
	if err := e.store.Commit(context.Background(), store.Change{Jobs: []store.JobWrite{{Job: lost}}}); err != nil {
		t.Fatal(err)
	}
	runService(t, e)
	j := waitJob(t, e, lost.ID, func(j job) bool { return j.State == "succeeded" })
	if j.Restarts != 0 {
		t.Errorf("a lost run used %d restarts", j.Restarts)
	}
	if lines := readLines(marker); len(lines) != 1 {
		t.Fatalf("the job ran %d times", len(lines))
	}
	var reasons []any
	for _, ev := range e.eventsWithData() {
		if ev.Subject == lost.ID && ev.Type == "job.restarted" {
			reasons = append(reasons, ev.Data["reason"])
		}
	}
	if len(reasons) != 1 || reasons[0] != "lost" {
		t.Errorf("job.restarted events with reasons %v, want one, lost", reasons)
	}
}

// TestJobInstancesCountedAcrossCrash runs a job of two instances: the
// first ends with code 0, the server is killed (SIGKILL) and restarted,
// and the second ends after. The restarted server must count the first
// instance's success, recorded with the job by the server that saw it,
// and report the job succeeded.
func TestJobInstancesCountedAcrossCrash(t *testing.T) {
	c := startCrashable(t)
	e, dir := c.env, c.dir
	b := c.activeBlock(2)
	marks, release := filepath.Join(dir, "marks"), filepath.Join(dir, "release")
	// Rank 0 ends at once; rank 1 waits for the release file.
	script := writeScript(t, `echo "$RANK" >> "`+marks+`.started"
if [ "$RANK" = 1 ]; then
  i=0
  while [ ! -e "`+release+`" ] && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.05; done
fi
echo "$RANK" >> "`+marks+`.done"
`)
	var j job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{script}, "instanceCount": 2}, &j); code != 201 {
		t.Fatalf("creating the job: %d", code)
	}
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	for deadline := time.Now().Add(10 * time.Second); len(readLines(marks+".done")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 did not end within 10s")
		}
	}
	time.Sleep(time.Second) // for the server to record rank 0's exit

	e2 := c.crashAndRestart()
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	got := waitJob(t, e2, j.ID, func(j job) bool { return j.State != "running" })
	if got.State != "succeeded" || got.Restarts != 0 {
		t.Fatalf("after both instances ended with code 0: %+v, want succeeded without restarts", got)
	}
	if started := readLines(marks + ".started"); len(started) != 2 {
		t.Fatalf("instances started %v: want each once", started)
	}
}

// crashable is the server binary on a SQLite file, which a test kills
// (SIGKILL) and starts again on the same file.
type crashable struct {
	t       *testing.T
	bin, db string
	dir     string
	srv     *process
	env     *env
}

func startCrashable(t *testing.T) *crashable {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	c := &crashable{t: t, bin: buildBinary(t), dir: t.TempDir()}
	c.db = filepath.Join(c.dir, "capblock.db")
	c.start()
	return c
}

func (c *crashable) start() {
	simStart := ts(t0) // the first start; a restart goes on from the stored clock
	if c.srv != nil {
		simStart = ""
	}
	c.srv = startProcess(c.t, c.bin, c.db, simStart)
	useToken(c.t, c.srv.url, filepath.Join(c.dir, "admin.token"))
	c.env = &env{t: c.t, url: c.srv.url}
}

// activeBlock buys count h100.8x for 4 hours from t0+1h and moves the
// clock to its start.
func (c *crashable) activeBlock(count int) block {
	c.t.Helper()
	s := t0.Add(time.Hour)
	b, code := c.env.buy(c.env.exact(searchQuery("h100.8x", count, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "crash-block")
	if code != 201 {
		c.t.Fatalf("buying: %d", code)
	}
	c.env.advance(time.Hour)
	return b
}

// crashAndRestart kills the server and starts it again on its file; the
// restarted simulated clock catches up with the hour activeBlock moved.
func (c *crashable) crashAndRestart() *env {
	c.t.Helper()
	if err := c.srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = c.srv.cmd.Wait()
	c.start()
	c.env.advance(time.Hour)
	return c.env
}
