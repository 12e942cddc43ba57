package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store/pgtest"
	"capblock/internal/testproc"
)

// replica is one `capblock serve` process on a shared PostgreSQL database.
type replica struct {
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
}

// startReplicas starts n replicas on one new database, on simulated
// clocks at t0, and waits until each listens and one leads. Each env
// function, if any, adds variables to the environment of replica i.
func startReplicas(t testing.TB, n int, env ...func(i int) []string) (dsn string, rs []*replica) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the server binary on PostgreSQL")
	}
	dsn = pgtest.Start(t).NewDatabase(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	t.Cleanup(func() { testproc.KillUnder(dir) }) // the jobs' shims, once the replicas are killed
	tokenFile := filepath.Join(dir, "admin.token")
	for i := range n {
		r := &replica{logs: &syncBuffer{}}
		// One jobs directory for the test's replicas, as on one host, so
		// that a new leader adopts the jobs of the one before it.
		r.cmd = exec.Command(bin, "serve", "--db", dsn, "--listen", "127.0.0.1:0", "--sim-clock", "--sim-start", ts(t0),
			"--rate-limit", "0", "--admin-token-file", tokenFile, "--secrets-key-file", filepath.Join(dir, "secrets.key"), "--jobs-dir", filepath.Join(dir, "jobs"), "--allow-unisolated-jobs")
		for _, e := range env {
			r.cmd.Env = append(r.cmd.Environ(), e(i)...)
		}
		stderr, err := r.cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.cmd.Process.Kill(); _ = r.cmd.Wait() })
		found := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				line := sc.Text()
				r.logs.Write([]byte(line + "\n"))
				if m := listenLine.FindStringSubmatch(line); m != nil {
					found <- m[1]
				}
			}
		}()
		select {
		case r.url = <-found:
		case <-time.After(30 * time.Second):
			t.Fatalf("replica %d did not start:\n%s", i, r.logs.String())
		}
		rs = append(rs, r)
	}
	for _, r := range rs {
		useToken(t, r.url, tokenFile)
	}
	if leaderOf(t, rs) < 0 {
		t.Fatal("no replica took the reconciler's lead")
	}
	return dsn, rs
}

// leaderOf waits for a replica to say that it runs the reconciler and
// returns its index, or -1.
func leaderOf(t testing.TB, rs []*replica) int {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for i, r := range rs {
			if r != nil && strings.Contains(r.logs.String(), "this replica now runs the reconciler") {
				return i
			}
		}
	}
	return -1
}

// TestReplicasNoDoubleBooking fires 240 concurrent purchases of two
// overlapping terms at three replicas on one PostgreSQL, each buyer with a
// quote of its own, searched on its replica before the race. The overlap
// day of zone-a's 32 H100 nodes holds exactly 32 instances, whatever the
// order; the stored allocations show no GPU in two live blocks at once,
// the exclusion constraint is in place, every acknowledged block is
// stored once, and the ledger matches the blocks.
func TestReplicasNoDoubleBooking(t *testing.T) {
	dsn, rs := startReplicas(t, 3)
	s1 := t0.Add(2 * time.Hour)
	s2 := s1.Add(24 * time.Hour)
	q := func(s time.Time) string {
		return searchQuery("h100.8x", 1, 48, s, s.Add(48*time.Hour)) + "&zone=zone-a"
	}
	const buyers = 240
	quotes := make([]offering, buyers)
	for i := range quotes {
		s := s1
		if i%2 == 1 {
			s = s2
		}
		quotes[i] = (&env{t: t, url: rs[i%3].url}).exact(q(s), 48, s)
	}
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
		race  = make(chan struct{})
	)
	for i, o := range quotes {
		wg.Go(func() {
			<-race
			id, code, problem, detail, err := postBlockProblem(rs[i%3].url, o.OfferingID, fmt.Sprintf("r-%d", i))
			if err != nil {
				t.Errorf("buyer %d: %v", i, err)
				return
			}
			switch {
			case code == 201:
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			case code == 409 && problem == "no_capacity":
			default: // a conflict that retries did not settle is a failure too
				t.Errorf("buyer %d: status %d %s: %s", i, code, problem, detail)
			}
		})
	}
	close(race)
	wg.Wait()
	if len(acked) != 32 {
		t.Fatalf("%d purchases succeeded across the replicas, want exactly 32 (zone-a's H100 nodes over the overlap)", len(acked))
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var constraints int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'x' AND conrelid = 'allocations'::regclass`).Scan(&constraints); err != nil || constraints != 1 {
		t.Fatalf("exclusion constraints on allocations: %d, %v", constraints, err)
	}
	var clashes int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM allocations x JOIN allocations y
		ON x.node = y.node AND x.gpus && y.gpus AND x.block_id < y.block_id AND x.during && y.during
		WHERE x.live AND y.live`).Scan(&clashes); err != nil {
		t.Fatal(err)
	}
	if clashes != 0 {
		t.Fatalf("%d pairs of live allocations share a GPU at overlapping times", clashes)
	}
	var stored, distinct int
	var fees, charges int64
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT id), coalesce(sum(fee_minor), 0) FROM blocks WHERE id = ANY($1)`, acked).Scan(&stored, &distinct, &fees); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT -coalesce(sum(amount_minor), 0) FROM postings WHERE kind = 'charge'`).Scan(&charges); err != nil {
		t.Fatal(err)
	}
	var all int
	conn.QueryRow(ctx, `SELECT count(*) FROM blocks`).Scan(&all)
	if stored != 32 || distinct != 32 || all != 32 || charges != fees {
		t.Fatalf("stored %d (%d distinct, %d in all) of 32 acknowledged blocks; charges %d, fees %d", stored, distinct, all, charges, fees)
	}
	// Every replica sees every block, whoever sold it.
	for _, r := range rs {
		for _, id := range acked[:5] {
			if code := call(t, r.url, "GET", "/v1/blocks/"+id, nil, nil); code != 200 {
				t.Fatalf("replica %s: block %s: %d", r.url, id, code)
			}
		}
	}
	// Exactly one replica says it leads, and each shows its pool and
	// retries; every conflict between replicas' purchases was settled by
	// one catch-up of the index.
	leaders := 0
	var conflicts, catchUps float64
	for _, r := range rs {
		resp, err := http.Get(r.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "\ncapblock_reconciler_leader 1") {
			leaders++
		}
		for _, m := range []string{"capblock_db_pool_connections ", "capblock_store_transaction_retries_total ",
			"capblock_purchase_conflicts_total ", "capblock_watch_lost_total "} {
			if !strings.Contains(string(body), m) {
				t.Errorf("replica %s: no %s in /metrics", r.url, m)
			}
		}
		conflicts += metricSum(string(body), "capblock_purchase_conflicts_total")
		catchUps += metricSum(string(body), "capblock_index_catchups_total")
	}
	if leaders != 1 {
		t.Errorf("%d replicas say they lead, want 1", leaders)
	}
	// Every conflict catches up; so does a purchase refused for no
	// capacity, before it answers, which may add more.
	if catchUps < conflicts {
		t.Errorf("%v conflicts but %v catch-ups of the index", conflicts, catchUps)
	}
	t.Logf("%v purchases conflicted across the replicas and were decided again", conflicts)
	// And no replica offers what the others sold: zone-a is full on the overlap day.
	for _, r := range rs {
		o := (&env{t: t, url: r.url}).offerings(q(s2))
		for _, x := range o {
			if x.StartTime.Before(s2.Add(24*time.Hour)) && x.EndTime.After(s2) && x.Zone == "zone-a" {
				t.Fatalf("replica %s offers %s..%s in zone-a, which is sold out", r.url, x.StartTime, x.EndTime)
			}
		}
	}
}

// TestReconcilerFailover kills the replica that runs the reconciler;
// another takes over, and a block that starts after the kill becomes
// active, once.
func TestReconcilerFailover(t *testing.T) {
	_, rs := startReplicas(t, 3)
	leader := leaderOf(t, rs)
	other := rs[(leader+1)%3]
	s := t0.Add(2 * time.Hour)
	o := (&env{t: t, url: other.url}).exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s)
	id, code, err := postBlock(other.url, o.OfferingID, "failover")
	if err != nil || code != 201 {
		t.Fatalf("buying: %d %v", code, err)
	}
	if err := rs[leader].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = rs[leader].cmd.Wait()
	rs[leader] = nil
	// Through one replica: the clock is shared, every replica follows it.
	call(t, other.url, "POST", "/v1/admin/clock", map[string]any{"advance": "3h"}, nil)
	var got block
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && got.State != "active"; time.Sleep(100 * time.Millisecond) {
		call(t, other.url, "GET", "/v1/blocks/"+id, nil, &got)
	}
	if got.State != "active" {
		for i, r := range rs {
			if r != nil {
				t.Logf("replica %d's log:\n%s", i, r.logs.String())
			}
		}
		t.Fatalf("block %s is %q after the leader (replica %d) died: no replica took over", id, got.State, leader)
	}
	newLeader := leaderOf(t, rs)
	if newLeader < 0 || newLeader == leader {
		t.Fatalf("no new leader (%d, was %d)", newLeader, leader)
	}
	var evs struct{ Events []event }
	call(t, other.url, "GET", "/v1/events", nil, &evs)
	active := 0
	for _, e := range evs.Events {
		if e.Subject == id && e.Type == "block.active" {
			active++
		}
	}
	if active != 1 {
		t.Fatalf("%d block.active events for %s, want 1", active, id)
	}
}

// metricSum adds up the samples of a metric (all its labels) in a
// Prometheus text exposition.
func metricSum(exposition, name string) float64 {
	var sum float64
	for line := range strings.SplitSeq(exposition, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
