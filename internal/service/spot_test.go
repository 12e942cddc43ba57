package service

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// The tests of spot work under budgets and quotas; those that need a
// job's processes run them on this machine (spotRunner).

// usd is an amount in cents.
func usd(cents int64) core.Money { return core.Money{Minor: cents, Currency: "USD"} }

// spotTeam stores team "t", whose budget and quotas the tests set.
func spotTeam(t *testing.T, svc *Service, st *sqlite.Store) {
	t.Helper()
	if err := st.CreateTeam(t.Context(), core.Team{ID: "t", Name: "t", CreatedAt: svc.clock.Now()}); err != nil {
		t.Fatal(err)
	}
}

// TestSpotJobWithinQuotaAndBudget: a preemptible job is refused when its
// team's budget cannot pay for an hour of its instances at the spot price
// (h100.8x: 98.32 × 0.3 = 29.50 an hour), and beyond the team's quota:
// instances per block, and instances held at once, counting the team's
// block (2 instances) and its open preemptible jobs. Nothing refused is
// stored.
func TestSpotJobWithinQuotaAndBudget(t *testing.T) {
	ctx := t.Context()
	svc, _, st := jobRunner(t)
	spotTeam(t, svc, st)
	for _, c := range []struct {
		name   string
		budget core.Money // none when zero
		quota  core.Quota
		count  int
		want   error
	}{
		{name: "a budget of 10.00", budget: usd(1000), count: 1, want: core.ErrBudgetExceeded},
		{name: "an hour of one, not of two", budget: usd(3000), count: 2, want: core.ErrBudgetExceeded},
		{name: "an hour of one", budget: usd(2950), count: 1},
		{name: "per block", quota: core.Quota{MaxInstancesPerBlock: 1}, count: 2, want: core.ErrQuotaExceeded},
		{name: "held with the block's 2 and the job's 1", quota: core.Quota{MaxInstancesHeld: 4}, count: 2, want: core.ErrQuotaExceeded},
		{name: "held up to the limit", quota: core.Quota{MaxInstancesHeld: 4}, count: 1},
		{name: "held with the two jobs'", quota: core.Quota{MaxInstancesHeld: 4}, count: 1, want: core.ErrQuotaExceeded},
	} {
		b := core.Budget{Team: "t", Amount: usd(0), Period: core.BudgetNone}
		if c.budget.Minor > 0 {
			b = core.Budget{Team: "t", Amount: c.budget, Period: core.BudgetTotal}
		}
		if _, err := svc.PutBudget(ctx, b); err != nil {
			t.Fatal(err)
		}
		q := c.quota
		q.Team = "t"
		if _, err := svc.PutQuota(ctx, q); err != nil {
			t.Fatal(err)
		}
		before, err := st.ListJobs(ctx, "t", false)
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.CreateJob(ctx, "t", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", InstanceCount: c.count, Command: []string{"train"}})
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		after, _ := st.ListJobs(ctx, "t", false)
		if c.want != nil && len(after) != len(before) {
			t.Errorf("%s: a refused job was stored", c.name)
		}
	}
}

// TestSpotJobStartsWithinBudget: a waiting preemptible job whose team's
// budget can no longer pay for its minimum run does not start when GPUs
// free up: it waits, saying why; it starts once the budget allows.
func TestSpotJobStartsWithinBudget(t *testing.T) {
	ctx := t.Context()
	svc, rec, st := jobRunner(t)
	spotTeam(t, svc, st)
	if _, err := svc.PutBudget(ctx, core.Budget{Team: "t", Amount: usd(10000), Period: core.BudgetMonth}); err != nil {
		t.Fatal(err)
	}
	// Block cb-a holds both nodes: the job waits for GPUs.
	j, err := svc.CreateJob(ctx, "t", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x", Command: []string{"sweep"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PutBudget(ctx, core.Budget{Team: "t", Amount: usd(1000), Period: core.BudgetMonth}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetLending(ctx, "t", "cb-a", true); err != nil {
		t.Fatal(err)
	}
	svc.reconcileJobs(ctx)
	got, err := svc.GetJob(ctx, "t", j.ID)
	if err != nil || got.State != core.JobPending || got.Run != 0 || got.Reason != core.ReasonBudgetExceeded {
		t.Fatalf("over budget: %+v %v; want pending, never run, for %s", got, err, core.ReasonBudgetExceeded)
	}
	select {
	case c := <-rec.calls:
		t.Fatalf("%s over budget", c)
	default:
	}
	if _, err := svc.PutBudget(ctx, core.Budget{Team: "t", Amount: usd(10000), Period: core.BudgetMonth}); err != nil {
		t.Fatal(err)
	}
	svc.reconcileJobs(ctx)
	if got := rec.next(t, 1)[0]; got != "start "+j.ID+"/1 rank 0 slot 0" {
		t.Errorf("within budget: %s, want the job's start", got)
	}
}

// spotRunner is a service on a SQLite file over two whole h100.8x nodes,
// n0 and n1, holding blocks (stored first), whose jobs run as processes
// of this machine; its clock is simulated from planT0, and it leads
// until the test ends.
func spotRunner(t *testing.T, blocks ...core.Block) (*Service, *clock.Sim, *sqlite.Store) {
	ctx := t.Context()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "spot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if len(blocks) > 0 {
		if err := st.Commit(ctx, store.Change{Insert: blocks}); err != nil {
			t.Fatal(err)
		}
	}
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: usd(9832)}}}
	for _, n := range []string{"n0", "n1"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	sim := clock.NewSim(planT0)
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler), JobsDir: filepath.Join(dir, "jobs")})
	if err != nil {
		t.Fatal(err)
	}
	spotTeam(t, svc, st)
	runService(t, svc)
	return svc, sim, st
}

// wholeNodes are placements of both nodes of spotRunner's fleet.
var wholeNodes = []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}

// spotJob runs a preemptible job of one h100.8x for team t whose process
// writes into dir (a directory of the test's) its CAPBLOCK_SEGMENT_END,
// the path of its CAPBLOCK_KILL_AT_FILE and what it holds (kill-at.start),
// its HOME, then its pid; at SIGTERM, what the kill-at file holds
// (kill-at.term), then "term". It exits at SIGTERM when polite, else only
// when killed (or after 30s).
func spotJob(t *testing.T, svc *Service, dir string, polite bool) core.Job {
	t.Helper()
	onTerm := `cat "$CAPBLOCK_KILL_AT_FILE" > "$OUT/kill-at.term"; echo TERM > "$OUT/term"`
	if polite {
		onTerm += "; exit 0"
	}
	script := filepath.Join(dir, "job.sh")
	body := `#!/bin/sh
echo "$CAPBLOCK_SEGMENT_END" > "$OUT/segment-end"
echo "$CAPBLOCK_KILL_AT_FILE" > "$OUT/kill-at-file"
echo "$HOME" > "$OUT/home"
cat "$CAPBLOCK_KILL_AT_FILE" > "$OUT/kill-at.start"
trap '` + onTerm + `' TERM
echo $$ > "$OUT/pid"
i=0
while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	j, err := svc.CreateJob(t.Context(), "t", contract.JobRequest{Preemptible: true, InstanceType: "h100.8x",
		Command: []string{script}, Env: map[string]string{"OUT": dir}})
	if err != nil {
		t.Fatal(err)
	}
	pid := readWhenWritten(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() {
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL) // a test that failed early leaves none behind
		}
	})
	return j
}

// readWhenWritten waits for a file a job writes, and returns what it
// holds.
func readWhenWritten(t *testing.T, path string) string {
	t.Helper()
	var data []byte
	waitFor(t, 20*time.Second, path, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil && len(data) > 0
	})
	return strings.TrimSpace(string(data))
}

// readFile returns what a file that a job wrote holds ("" when none).
func readFile(t *testing.T, path string) string {
	t.Helper()
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

// spotAt moves the clock to planT0+d and runs one pass of the job loop.
func spotAt(t *testing.T, svc *Service, sim *clock.Sim, d time.Duration) {
	t.Helper()
	if _, err := sim.Set(planT0.Add(d)); err != nil {
		t.Fatal(err)
	}
	svc.reconcileJobs(t.Context())
}

// spotCharges waits until job id's runs are charged to team t, and
// returns what each charge was.
func spotCharges(t *testing.T, st *sqlite.Store, id string, runs int) []int64 {
	t.Helper()
	var got []int64
	waitFor(t, 20*time.Second, "the charge of job "+id, func() bool {
		entries, err := st.Ledger(t.Context(), "t")
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, e := range entries {
			if e.Subject == id && e.Kind == core.LedgerCharge {
				got = append(got, e.Amount.Minor)
			}
		}
		return len(got) >= runs
	})
	return got
}

// utc formats t as the job sees times.
func utc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// TestSpotRunPreemptedBeforeTheBudgetRunsOut: a team with 30.00 left
// runs a preemptible h100.8x (29.496 an hour): the money runs out at
// 1h01m01s, which the job is told at its start (its segment end and its
// kill-at file: the kill, 5s before). Before the notice (10 minutes
// earlier) it runs on; at 52m it gets SIGTERM, with the reason in the
// job and its event, and its run is charged when it is gone. What is
// left cannot pay for another hour: it does not start again.
func TestSpotRunPreemptedBeforeTheBudgetRunsOut(t *testing.T) {
	ctx := t.Context()
	svc, sim, st := spotRunner(t)
	if _, err := svc.PutBudget(ctx, core.Budget{Team: "t", Amount: usd(3000), Period: core.BudgetTotal}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j := spotJob(t, svc, dir, true)
	kill := utc(planT0.Add(time.Hour + 56*time.Second))
	if got := readFile(t, filepath.Join(dir, "segment-end")); got != kill {
		t.Errorf("CAPBLOCK_SEGMENT_END %s, want %s", got, kill)
	}
	if got := readFile(t, filepath.Join(dir, "kill-at.start")); got != kill {
		t.Errorf("the kill-at file at the start: %q, want %s", got, kill)
	}

	spotAt(t, svc, sim, 50*time.Minute)
	if got, _ := svc.GetJob(ctx, "t", j.ID); got.State != core.JobRunning {
		t.Fatalf("before the notice: %s", got.State)
	}
	spotAt(t, svc, sim, 52*time.Minute)
	readWhenWritten(t, filepath.Join(dir, "term"))
	if got := readFile(t, filepath.Join(dir, "kill-at.term")); got != kill {
		t.Errorf("the kill-at file at SIGTERM: %q, want %s", got, kill)
	}
	// 52 minutes at 29.496 an hour.
	if got := spotCharges(t, st, j.ID, 1); len(got) != 1 || got[0] != 2556 {
		t.Errorf("charges %v, want [2556]", got)
	}
	evs, err := st.Events(ctx, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var why []any
	for _, ev := range evs {
		if ev.Subject == j.ID && ev.Type == core.EventJobInterrupted {
			why = append(why, ev.Data["reason"])
		}
	}
	if len(why) != 1 || why[0] != core.ReasonBudgetExceeded {
		t.Errorf("interruptions' reasons %v, want [%s]", why, core.ReasonBudgetExceeded)
	}
	spotAt(t, svc, sim, 53*time.Minute)
	got, err := svc.GetJob(ctx, "t", j.ID)
	if err != nil || got.State != core.JobPending || got.Run != 1 || got.Reason != core.ReasonBudgetExceeded || got.Unbilled != nil {
		t.Errorf("after its run: %+v %v; want pending, charged, waiting for budget", got, err)
	}
}

// TestSpotRunKilledWithinBudget: a preemptible job that ignores its
// SIGTERM for the budget is killed when its stop said (1h00m56s), and is
// charged until then: within the team's 30.00.
func TestSpotRunKilledWithinBudget(t *testing.T) {
	svc, sim, st := spotRunner(t)
	if _, err := svc.PutBudget(t.Context(), core.Budget{Team: "t", Amount: usd(3000), Period: core.BudgetTotal}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j := spotJob(t, svc, dir, false)
	spotAt(t, svc, sim, 52*time.Minute)
	readWhenWritten(t, filepath.Join(dir, "term"))
	spotAt(t, svc, sim, time.Hour+50*time.Second)
	if entries, _ := st.Ledger(t.Context(), "t"); len(entries) != 0 {
		t.Errorf("charged before its kill: %+v", entries)
	}
	spotAt(t, svc, sim, time.Hour+56*time.Second)
	// 1h00m56s at 29.496 an hour.
	if got := spotCharges(t, st, j.ID, 1); len(got) != 1 || got[0] != 2995 {
		t.Errorf("charges %v, want [2995]", got)
	}
}

// TestSpotRunChargedUntilItsLastProcessIsGone: a block bought over a
// preemptible job's GPUs starts at 1h; the job is told at its start that
// it is killed at 59m55s, gets SIGTERM at 50m, ignores it, and is killed
// at 59m55s: its run is charged until then, not until the SIGTERM.
func TestSpotRunChargedUntilItsLastProcessIsGone(t *testing.T) {
	blk := core.Block{ID: "cb-b", Team: "u", InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "z",
		Start: planHour(1), End: planHour(3), State: core.StateScheduled, CreatedAt: planT0.Add(-time.Hour),
		Fee: usd(1), Placements: wholeNodes}
	svc, sim, st := spotRunner(t, blk)
	dir := t.TempDir()
	j := spotJob(t, svc, dir, false)
	kill := utc(planHour(1).Add(-5 * time.Second))
	if got := readFile(t, filepath.Join(dir, "segment-end")); got != kill {
		t.Errorf("CAPBLOCK_SEGMENT_END %s, want %s", got, kill)
	}

	spotAt(t, svc, sim, 50*time.Minute)
	readWhenWritten(t, filepath.Join(dir, "term"))
	if got, _ := svc.GetJob(t.Context(), "t", j.ID); got.State != core.JobPending || got.Reason != core.ReasonPreempted {
		t.Errorf("at the notice: %s (%s), want pending (preempted)", got.State, got.Reason)
	}
	if entries, _ := st.Ledger(t.Context(), "t"); len(entries) != 0 {
		t.Errorf("charged while its process runs: %+v", entries)
	}
	spotAt(t, svc, sim, time.Hour-5*time.Second)
	// 59m55s at 29.496 an hour.
	if got := spotCharges(t, st, j.ID, 1); len(got) != 1 || got[0] != 2946 {
		t.Errorf("charges %v, want [2946]", got)
	}
}

// TestSpotRunToldWhenItIsKilled: a preemptible job on a lending block's
// GPUs, which nothing needs, is told at its start that it runs to the
// horizon. When the holder starts a job there (at 10m), the GPUs are
// needed a notice later: the job's kill-at file says so (19m55s) before
// its SIGTERM comes. The file is in a directory of the server's that the
// job reads and may not write.
func TestSpotRunToldWhenItIsKilled(t *testing.T) {
	blk := core.Block{ID: "cb-l", Team: "u", InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "z",
		Start: planHour(-1), End: planHour(10), State: core.StateActive, CreatedAt: planT0.Add(-2 * time.Hour),
		Fee: usd(1), Placements: wholeNodes, Lending: true}
	svc, sim, _ := spotRunner(t, blk)
	dir := t.TempDir()
	spotJob(t, svc, dir, true)
	horizon := utc(planT0.Add(svc.fleet.Limits.Horizon))
	if got := readFile(t, filepath.Join(dir, "kill-at.start")); got != horizon {
		t.Errorf("the kill-at file at the start: %q, want the horizon, %s", got, horizon)
	}

	if _, err := sim.Set(planT0.Add(10 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateJob(t.Context(), "u", contract.JobRequest{BlockID: "cb-l", InstanceCount: 1, Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	spotAt(t, svc, sim, 10*time.Minute)
	readWhenWritten(t, filepath.Join(dir, "term"))
	if got, want := readFile(t, filepath.Join(dir, "kill-at.term")), utc(planT0.Add(20*time.Minute-5*time.Second)); got != want {
		t.Errorf("the kill-at file at SIGTERM: %q, want %s", got, want)
	}
	// The file is the server's, out of the job's own directory.
	path := readFile(t, filepath.Join(dir, "kill-at-file"))
	if path == "" {
		t.Fatal("no CAPBLOCK_KILL_AT_FILE")
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o022 != 0 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("the kill-at file's directory has mode %v: want the server's, written by it alone", fi.Mode())
	}
	if work := readFile(t, filepath.Join(dir, "home")); strings.HasPrefix(path, work+"/") {
		t.Errorf("the kill-at file %s is in the job's own directory %s", path, work)
	}
}
