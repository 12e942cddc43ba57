package e2e

import (
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"capblock/internal/core"
)

// backfillFleet is two whole H100 nodes, nothing sold yet.
const backfillFleet = `
currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: h100-, count: 2, gpuModel: H100, gpus: 8}
`

// waitFile waits for a file with content, for at most 20 seconds.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			return strings.TrimSpace(string(data))
		}
	}
	t.Fatalf("%s never written", path)
	return ""
}

// waitGone waits until the process pid is gone, for at most 20 seconds.
func waitGone(t *testing.T, what, pid string) {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatalf("%s: pid %q", what, pid)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(n, 0) != nil {
			return
		}
	}
	t.Fatalf("%s (pid %d) still runs", what, n)
}

// TestBackfillPreemptedBeforeABlock: two preemptible jobs run on the
// unsold GPUs of the fleet; a search while they run still offers those
// GPUs, and a block is bought over them, starting in an hour. Both jobs
// get SIGTERM the notice (10 minutes) before the start: the one that
// traps it exits, the one that ignores it is killed just before the
// start; neither is there when the block becomes active, on time. The
// jobs wait again, and their runs are charged at the spot price until
// their last process is gone.
func TestBackfillPreemptedBeforeABlock(t *testing.T) {
	e := startFleet(t, backfillFleet)
	runService(t, e)
	dir := t.TempDir()
	polite := writeScript(t, `echo $$ > "`+dir+`/polite.pid"
echo "$CUDA_VISIBLE_DEVICES" > "`+dir+`/polite.gpus"
trap 'date +%s > "`+dir+`/polite.term"; exit 0' TERM
while :; do sleep 0.05; done
`)
	stubborn := writeScript(t, `echo $$ > "`+dir+`/stubborn.pid"
trap 'cat "$CAPBLOCK_KILL_AT_FILE" > "`+dir+`/stubborn.killat"; date +%s > "`+dir+`/stubborn.term"' TERM
while :; do sleep 0.05; done
`)
	var a, b job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "polite", "preemptible": true, "instanceType": "h100.8x",
		"command": []string{polite}}, &a); code != 201 || a.State != "pending" {
		t.Fatalf("creating a preemptible job: %d %+v", code, a)
	}
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "stubborn", "preemptible": true, "instanceType": "h100.8x",
		"command": []string{stubborn}}, &b)
	waitJob(t, e, a.ID, func(j job) bool { return j.State == "running" })
	waitJob(t, e, b.ID, func(j job) bool { return j.State == "running" })
	politePID, stubbornPID := waitFile(t, dir+"/polite.pid"), waitFile(t, dir+"/stubborn.pid")
	if gpus := waitFile(t, dir+"/polite.gpus"); gpus != "0,1,2,3,4,5,6,7" {
		t.Errorf("the job's GPUs: %q", gpus)
	}

	// Searches and sales ignore backfill: both nodes are offered.
	start := t0.Add(time.Hour)
	blk, code := e.buy(e.exact(searchQuery("h100.8x", 2, 4, start, start.Add(4*time.Hour)), 4, start).OfferingID, "over-backfill")
	if code != 201 {
		t.Fatalf("buying over backfill: %d", code)
	}

	// 11 minutes before the start: nothing yet.
	e.advance(49 * time.Minute)
	time.Sleep(1500 * time.Millisecond) // a pass of the job loop or more
	if _, err := os.Stat(dir + "/polite.term"); err == nil {
		t.Fatal("SIGTERM before the notice")
	}
	// The notice: SIGTERM; the polite job exits, and both wait again.
	e.advance(time.Minute)
	waitFile(t, dir+"/polite.term")
	waitFile(t, dir+"/stubborn.term")
	waitGone(t, "the polite job", politePID)
	// Its run is charged once its exit is reported, at the simulated
	// moment it exited: wait for it before the clock moves on.
	waitCharged(t, e, a.ID, "the polite job")
	for _, id := range []string{a.ID, b.ID} {
		if j := waitJob(t, e, id, func(j job) bool { return j.State == "pending" }); j.Reason != core.ReasonPreempted {
			t.Errorf("job %s waits for %q, want preempted", id, j.Reason)
		}
	}
	if syscall.Kill(atoi(t, stubbornPID), 0) != nil {
		t.Fatal("the stubborn job is gone already; the test shows nothing")
	}
	// At SIGTERM the job can read when it will be killed: just before the
	// block's start, not the horizon.
	if killAt, want := waitFile(t, dir+"/stubborn.killat"), start.Add(-5*time.Second).UTC().Format(time.RFC3339); killAt != want {
		t.Errorf("the job's $CAPBLOCK_KILL_AT_FILE says %q at SIGTERM, want %s", killAt, want)
	}
	// Just before the start, what ignored SIGTERM is killed.
	e.advance(10*time.Minute - 5*time.Second)
	waitGone(t, "the stubborn job", stubbornPID)
	// Its run is charged once its exit is reported, at the simulated
	// moment of the kill: wait for it before the clock moves on.
	waitCharged(t, e, b.ID, "the stubborn job")

	// The start: the block is active, on time.
	e.advance(5 * time.Second)
	var got block
	for deadline := time.Now().Add(20 * time.Second); got.State != "active" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		call(t, e.url, "GET", "/v1/blocks/"+blk.ID, nil, &got)
	}
	if got.State != "active" {
		t.Fatalf("block %s is %s at its start", blk.ID, got.State)
	}
	evs, err := e.store.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	activated := false
	for _, ev := range evs {
		if ev.Subject == blk.ID && ev.Type == core.EventBlockActive {
			activated = true
			if !ev.Time.Equal(start) {
				t.Errorf("block active at %s, want %s", ev.Time, start)
			}
		}
	}
	if !activated {
		t.Errorf("no %s event of block %s", core.EventBlockActive, blk.ID)
	}
	var entries []core.LedgerEntry
	// One h100.8x at 0.3 × 98.32 an hour: the polite job ran 50 minutes,
	// the stubborn one until it was killed, 5 seconds before the start.
	entries, err = e.store.Ledger(t.Context(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	spot := map[string]int64{}
	for _, le := range entries {
		if le.Subject == a.ID || le.Subject == b.ID {
			spot[le.Subject] += le.Amount.Minor
		}
	}
	want := map[string]int64{a.ID: 2458, b.ID: 2946} // 50m, 59m55s
	if !maps.Equal(spot, want) {
		t.Errorf("spot charges %v, want %v", spot, want)
	}
	// With the fleet sold, the jobs wait.
	time.Sleep(1500 * time.Millisecond)
	for _, id := range []string{a.ID, b.ID} {
		var j job
		call(t, e.url, "GET", "/v1/jobs/"+id, nil, &j)
		if j.State != "pending" {
			t.Errorf("job %s is %s on a sold fleet", id, j.State)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackfillOnLentGPUs: an active block lends its idle GPUs; a
// preemptible job runs on them (and on the unsold node beside). When the
// holder starts a job there, the backfill gets SIGTERM at once and the
// holder's job starts when it is gone; the run is charged at the spot
// price, the holder is credited half of what ran on its GPUs, and the
// block's utilisation counts those GPU-hours as lent.
func TestBackfillOnLentGPUs(t *testing.T) {
	e := startFleet(t, backfillFleet)
	runService(t, e)
	dir := t.TempDir()
	start := t0.Add(time.Hour)
	blk, code := e.buy(e.exact(searchQuery("h100.8x", 1, 4, start, start.Add(4*time.Hour)), 4, start).OfferingID, "lender")
	if code != 201 {
		t.Fatalf("buying: %d", code)
	}
	e.advance(time.Hour) // active
	var lent struct {
		ID      string `json:"id"`
		Lending bool   `json:"lending"`
	}
	if code := call(t, e.url, "POST", "/v1/blocks/"+blk.ID+"/lending", map[string]any{"enabled": true}, &lent); code != 200 || !lent.Lending {
		t.Fatalf("lending: %d %+v", code, lent)
	}
	polite := writeScript(t, `echo $$ > "`+dir+`/bf.$RANK.pid"
trap 'date +%s > "`+dir+`/bf.$RANK.term"; exit 0' TERM
while :; do sleep 0.05; done
`)
	var bf job
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"preemptible": true, "instanceType": "h100.8x", "instanceCount": 2,
		"command": []string{polite}}, &bf)
	waitJob(t, e, bf.ID, func(j job) bool { return j.State == "running" })
	pids := []string{waitFile(t, dir+"/bf.0.pid"), waitFile(t, dir+"/bf.1.pid")}

	e.advance(30 * time.Minute)
	// The holder starts a job on its block: the backfill is preempted, and
	// the holder's job runs once it is gone.
	holder := writeScript(t, `echo started > "`+dir+`/holder.started"
while :; do sleep 0.05; done
`)
	var hj job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": blk.ID, "command": []string{holder}}, &hj); code != 201 {
		t.Fatalf("the holder's job: %d", code)
	}
	waitFile(t, dir+"/bf.0.term")
	for _, pid := range pids {
		waitGone(t, "the backfill", pid)
	}
	waitJob(t, e, hj.ID, func(j job) bool { return j.State == "running" })
	waitFile(t, dir+"/holder.started")
	if j := waitJob(t, e, bf.ID, func(j job) bool { return j.State == "pending" }); j.Reason != core.ReasonPreempted {
		t.Errorf("the backfill job waits for %q", j.Reason)
	}

	// 2 × h100.8x for 30 minutes at 0.3 × 98.32: 29.50; half ran on the
	// lent GPUs, half of that is credited: 7.37.
	entries, err := e.store.Ledger(t.Context(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	var charged, credited int64
	for _, le := range entries {
		switch {
		case le.Subject == bf.ID && le.Kind == core.LedgerCharge:
			charged += le.Amount.Minor
		case le.Subject == blk.ID && le.Kind == core.LedgerCredit:
			credited += le.Amount.Minor
		}
	}
	if charged != 2950 || credited != 737 {
		t.Errorf("charged %d and credited %d, want 2950 and 737", charged, credited)
	}
	var detail struct {
		Utilisation struct {
			Reserved, Used, Lent, Idle float64
		} `json:"utilisation"`
	}
	call(t, e.url, "GET", "/v1/blocks/"+blk.ID, nil, &detail)
	if detail.Utilisation.Lent != 4 {
		t.Errorf("utilisation %+v, want 4 GPU-hours lent", detail.Utilisation)
	}
}

// TestBackfillRefusedBeyondBudgetOrQuota: a preemptible job is refused
// with 402 budget_exceeded when its team's budget cannot pay for an hour
// of it at the spot price (10.00 for 29.50), and with 403 quota_exceeded
// beyond the team's instances per block; nothing is stored.
func TestBackfillRefusedBeyondBudgetOrQuota(t *testing.T) {
	e := startFleet(t, backfillFleet)
	job := map[string]any{"preemptible": true, "instanceType": "h100.8x", "command": []string{"true"}}
	if code := call(t, e.url, "PUT", "/v1/teams/"+e.team+"/budget", map[string]any{
		"amount": map[string]any{"amount": "10.00", "currency": "USD"}, "period": "month"}, nil); code != 200 {
		t.Fatalf("setting the budget: %d", code)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/jobs", job, &p); code != 402 || p.Code != "budget_exceeded" {
		t.Errorf("over budget: %d %s, want 402 budget_exceeded", code, p.Code)
	}
	if code := call(t, e.url, "PUT", "/v1/teams/"+e.team+"/budget", map[string]any{
		"amount": map[string]any{"amount": "0.00", "currency": "USD"}, "period": "none"}, nil); code != 200 {
		t.Fatalf("lifting the budget: %d", code)
	}
	if code := call(t, e.url, "PUT", "/v1/teams/"+e.team+"/quotas", map[string]any{
		"maxInstancesPerBlock": 1, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0}, nil); code != 200 {
		t.Fatalf("setting the quota: %d", code)
	}
	job["instanceCount"] = 2
	p = problem{}
	if code := call(t, e.url, "POST", "/v1/jobs", job, &p); code != 403 || p.Code != "quota_exceeded" {
		t.Errorf("beyond the quota: %d %s, want 403 quota_exceeded", code, p.Code)
	}
	if js, err := e.store.ListJobs(t.Context(), "", false); err != nil || len(js) != 0 {
		t.Errorf("refused jobs stored: %v %v", js, err)
	}
}

// waitCharged waits until a job's run is charged to the team's ledger.
func waitCharged(t *testing.T, e *env, jobID, what string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		entries, err := e.store.Ledger(t.Context(), e.team)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(entries, func(le core.LedgerEntry) bool { return le.Subject == jobID }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's run was never charged", what)
		}
	}
}
