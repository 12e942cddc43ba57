package e2e

import (
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// tortureConfig is how long a torture run lasts and what it breaks.
type tortureConfig struct {
	name       string
	duration   time.Duration // clients start operations for this long
	kills      int           // replicas killed with SIGKILL, at random times
	pgRestarts int           // crashes and restarts of PostgreSQL, spread out
	// countBudget bounds the search for the refusals that make a history
	// not linearizable, one porcupine check of a growing prefix at a time.
	countBudget time.Duration
}

var (
	tortureShort = tortureConfig{name: "short", duration: 35 * time.Second, kills: 4, pgRestarts: 1, countBudget: 20 * time.Second}
	tortureFull  = tortureConfig{name: "full", duration: 3 * time.Minute, kills: 20, pgRestarts: 2, countBudget: 5 * time.Minute}
)

const (
	tortureReplicas = 3
	tortureClients  = 16
	tortureWindows  = 4
	// tortureDrain is how long clients go on retrying what they started,
	// once faults have stopped, before they give its outcome up as unknown.
	tortureDrain = time.Minute
)

// TestTorture runs 16 clients against three replicas on one PostgreSQL
// database, on a fleet of four whole nodes, so that capacity is
// contended, while replicas are killed with SIGKILL and restarted and
// PostgreSQL crashes and restarts. Each client searches and buys (an
// answer that leaves the outcome open, such as a lost connection or a
// 5xx, is retried under the same client token), cancels what it bought,
// and reads, each request on a random replica. The history of what the
// clients asked and saw must be linearizable against capacity booked
// hour by hour (bookingModel, checked by porcupine), and the database
// must hold every acknowledged purchase and cancel, no block that no
// client asked for, and no GPU in two live blocks at once.
//
// When the history is linearizable but for some refusals for no
// capacity, the failure finds those refusals and explains them: how long
// before each its hours were freed, and where.
//
// It runs for 35 seconds with 4 kills and one PostgreSQL restart;
// CAPBLOCK_TORTURE=full runs it for 3 minutes with 20 kills and two
// restarts (docs/reliability.md). CAPBLOCK_TORTURE_SEED repeats a run's
// random choices (not its timing).
func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replicas on PostgreSQL under faults for half a minute or more")
	}
	cfg := tortureShort
	if os.Getenv("CAPBLOCK_TORTURE") == "full" {
		cfg = tortureFull
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CAPBLOCK_TORTURE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CAPBLOCK_TORTURE_SEED=%q: %v", s, err)
		}
	}
	t.Logf("%s run, seed %d (CAPBLOCK_TORTURE_SEED=%d repeats its choices)", cfg.name, seed, seed)
	rng := mathrand.New(mathrand.NewPCG(seed, 0))

	// 1. The replicas, and the buying team's quota out of the way: the
	//    fleet is the only limit.
	c := startTortureCluster(t, tortureReplicas, tortureFleet, seed)
	r := newTortureRun(t, c)

	// 2. The clients, and the faults on their schedule.
	r.start = time.Now()
	r.endOps = r.start.Add(cfg.duration)
	r.giveUp = r.endOps.Add(tortureDrain)
	var clients sync.WaitGroup
	for id := range tortureClients {
		cl := &tortureClient{r: r, id: id, rng: mathrand.New(mathrand.NewPCG(seed, uint64(100+id)))}
		clients.Go(cl.run)
	}
	for _, f := range planFaults(cfg, rng) {
		time.Sleep(time.Until(r.start.Add(f.at)))
		if f.pg {
			down := time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
			t.Logf("%6.1fs: PostgreSQL crashes, down for %s", time.Since(r.start).Seconds(), down.Round(time.Millisecond))
			if err := c.restartPostgres(down); err != nil {
				t.Fatal(err)
			}
			continue
		}
		slot := c.killOne()
		for ; slot < 0 && time.Since(r.start) < cfg.duration; slot = c.killOne() {
			time.Sleep(50 * time.Millisecond) // every replica is down: the kill waits for one
		}
		if slot < 0 {
			t.Logf("%6.1fs: no replica came up before the run's end; a kill is skipped", time.Since(r.start).Seconds())
			continue
		}
		t.Logf("%6.1fs: SIGKILL to replica %d", time.Since(r.start).Seconds(), slot)
	}
	clients.Wait()
	ran := time.Since(r.start)

	// 3. Once every replica is up again, one last read on each.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.waitAllUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, url := range c.up() {
		if !r.listOn(tortureClients, url) {
			t.Errorf("the last read on %s got no answer", url)
		}
	}

	// 4. What happened.
	c.mu.Lock()
	t.Logf("clients ran %s, %d of them, on %d replicas; %d H100 nodes sold whole in %d windows of %dh",
		ran.Round(time.Second), tortureClients, tortureReplicas, tortureNodes, tortureWindows, windowHours)
	t.Logf("faults: %d SIGKILLs, %d PostgreSQL restarts; %d replica starts (%d that never listened), %d exits unasked",
		c.kills, c.pgRestarts, c.starts, c.failed, len(c.exits))
	exits := slices.Clone(c.exits)
	c.mu.Unlock()
	r.mu.Lock()
	t.Logf("operations: %d in the history; %s", len(r.ops), r.countsLine())
	ops, problems := slices.Clone(r.ops), slices.Clone(r.problems)
	r.mu.Unlock()
	m := r.model()
	db := r.checkDatabase(t, c.dsn)
	t.Logf("database: %d lost, %d phantoms, %d double bookings (%d blocks stored, %d live)",
		len(db.lost), len(db.phantoms), db.doubles, db.stored, db.live)

	// 5. The checks, each on its own so that one failing hides none.
	t.Run("expected answers", func(t *testing.T) {
		for _, e := range exits {
			t.Errorf("%s", e)
		}
		for _, p := range problems {
			t.Errorf("%s", p)
		}
	})
	t.Run("linearizable refusals aside", func(t *testing.T) {
		lenient := m
		lenient.anyRefusal = true
		began := time.Now()
		verdict, info := porcupine.CheckOperationsVerbose(lenient.porcupine(), ops, 5*time.Minute)
		t.Logf("porcupine: %s in %s, %d operations, refusals for no capacity taken as possible",
			verdict, time.Since(began).Round(time.Millisecond), len(ops))
		if verdict != porcupine.Ok {
			reportIllegal(t, lenient, ops, info, verdict, lenient.stalls(ops, info))
		}
	})
	t.Run("linearizable", func(t *testing.T) {
		began := time.Now()
		verdict, info := porcupine.CheckOperationsVerbose(m.porcupine(), ops, 5*time.Minute)
		t.Logf("porcupine: %s in %s, %d operations", verdict, time.Since(began).Round(time.Millisecond), len(ops))
		if verdict == porcupine.Ok {
			return
		}
		// Linearizable but for refusals for no capacity: the refusals
		// at fault, explained.
		lenient := m
		lenient.anyRefusal = true
		if !porcupine.CheckOperations(lenient.porcupine(), ops) {
			reportIllegal(t, m, ops, info, verdict, m.stalls(ops, info))
			return
		}
		t.Error(r.explainRefusals(t, m, ops, cfg.countBudget))
	})
	t.Run("durable", func(t *testing.T) {
		for _, l := range db.lost {
			t.Errorf("lost: %s", l)
		}
	})
	t.Run("no phantoms", func(t *testing.T) {
		for _, p := range db.phantoms {
			t.Errorf("phantom: %s", p)
		}
	})
	t.Run("no double booking", func(t *testing.T) {
		if db.doubles > 0 {
			t.Errorf("%d pairs of live allocations share a GPU at overlapping times", db.doubles)
		}
	})
	keepLogs(t, c.dir)
}

// explainRefusals explains a history that is linearizable but for some
// refusals for no capacity, and returns the defects it shows. It finds
// those refusals one after the other (within budget), explains the
// first few, says for each how long before it its hours were freed and
// where, and counts apart those that the refusing replica itself counted
// as free (its placement refused what the hour-by-hour count allows)
// and those it counted as taken (a view of the bookings behind the
// store's).
func (r *tortureRun) explainRefusals(t *testing.T, m bookingModel, ops []porcupine.Operation, budget time.Duration) string {
	t.Helper()
	found, complete := m.culprits(ops, budget)
	for _, c := range found[:min(3, len(found))] {
		t.Log(m.explainCulprit(c))
	}
	if n := len(found); n > 0 && !refused(found[n-1].op) {
		found, complete = found[:n-1], false // a culprit that is no refusal ends the search
	}
	behind, placement := 0, 0
	for _, f := range found {
		t.Log(r.staleness(m, f))
		if countedFree(f.op) {
			placement++
		} else {
			behind++
		}
	}
	written := filepath.Join(t.ArtifactDir(), "torture-history.txt")
	if err := writeHistory(written, m, ops); err == nil {
		t.Logf("the history is written in %s (kept with -artifacts)", written)
	}
	refusals, atLeast := 0, ""
	for _, op := range ops {
		if refused(op) {
			refusals++
		}
	}
	if !complete {
		atLeast = "at least "
	}
	return fmt.Sprintf("defects: %s%d of %d refusals for no capacity were given while the capacity was free (examples above; "+
		"the rest of the history is linearizable): %d by a replica whose view of the bookings was behind the store's "+
		"(another replica had freed the hours moments before), %d by a replica that counted the capacity free but could "+
		"not place it.", atLeast, len(found), refusals, behind, placement)
}

// freeCount reads "only N of M … free" in a refusal's detail.
var freeCount = regexp.MustCompile(`only (\d+) of (\d+) `)

// countedFree reports whether the replica that refused a purchase said
// that as many instances as asked were free.
func countedFree(op porcupine.Operation) bool {
	as, _ := op.Metadata.(attempts)
	if len(as) == 0 {
		return false
	}
	m := freeCount.FindStringSubmatch(as[len(as)-1].detail)
	if m == nil {
		return false
	}
	free, _ := strconv.Atoi(m[1])
	asked, _ := strconv.Atoi(m[2])
	return free >= asked
}

// staleness says how long before a refusal of capacity that was free
// the capacity was freed, by which replica, and since when the refusing
// replica listened.
func (r *tortureRun) staleness(m bookingModel, c culprit) string {
	last, freeing, ok := m.freedBefore(c)
	token := c.op.Input.(bookingInput).token
	if !ok {
		return fmt.Sprintf("%s: refused by %s; no cancel of its hours returned before", token, last.replica)
	}
	since := "?"
	if at, ok := r.cluster.listeningSince(last.replica); ok {
		since = fmt.Sprintf("%.1fs", at.Sub(r.start).Seconds())
	}
	freer := "?"
	if as, _ := freeing.Metadata.(attempts); len(as) > 0 {
		freer = as[len(as)-1].replica
	}
	return fmt.Sprintf("%s: refused at %.3fs by %s (listening since %s), %s after the cancel of %s was acknowledged by %s",
		token, time.Duration(last.at).Seconds(), last.replica, since,
		time.Duration(last.at-freeing.Return).Round(100*time.Microsecond), freeing.Input.(bookingInput).token, freer)
}

// reportIllegal fails t for a history that model does not linearize,
// drawing it and explaining where each window's linearization stops.
func reportIllegal(t *testing.T, m bookingModel, ops []porcupine.Operation, info porcupine.LinearizationInfo,
	verdict porcupine.CheckResult, stalls []stall) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), "torture-history.html")
	if err := porcupine.VisualizePath(m.porcupine(), info, path); err != nil {
		t.Logf("drawing the history: %v", err)
	}
	for _, st := range stalls {
		t.Log(m.explain(st))
	}
	written := filepath.Join(t.ArtifactDir(), "torture-history.txt")
	if err := writeHistory(written, m, ops); err != nil {
		t.Logf("writing the history: %v", err)
	}
	t.Errorf("porcupine: the history is %s against the booking model (drawn in %s, written in %s; kept with -artifacts)", verdict, path, written)
}

// writeHistory writes the history, one operation a line in call order,
// with the terms of each token, for reading a failure at leisure.
func writeHistory(path string, m bookingModel, ops []porcupine.Operation) error {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmpInt64(a.Call, b.Call) })
	var b strings.Builder
	for _, op := range ops {
		in := op.Input.(bookingInput)
		if in.op != opList {
			t := m.terms[in.token]
			fmt.Fprintf(&b, "window %d: ", t.window)
		}
		fmt.Fprintln(&b, m.describeOp(op))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// newTortureRun reads the administrator's token and lifts the quota of
// its team, which the clients buy for.
func newTortureRun(t *testing.T, c *tortureCluster) *tortureRun {
	t.Helper()
	token, err := os.ReadFile(filepath.Join(c.dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	r := &tortureRun{cluster: c, token: strings.TrimSpace(string(token)),
		http:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: tortureClients}},
		terms: map[string]bookingTerms{}, acked: map[string]string{}, refused: map[string]bool{},
		cancelTried: map[string]bool{}, cancelled: map[string]bool{}, counts: map[string]int{}}
	for w := range tortureWindows {
		r.windows = append(r.windows, t0.Add(time.Duration(w+1)*24*time.Hour))
	}
	url := c.up()[0]
	tokens.Store(url, r.token)
	var me struct{ User user }
	if code := call(t, url, "GET", "/v1/whoami", nil, &me); code != 200 {
		t.Fatalf("whoami: %d", code)
	}
	quota := map[string]any{"maxInstancesPerBlock": 0, "maxInstancesHeld": 1000000, "maxDurationHours": 0, "maxLeadDays": 0}
	if code := call(t, url, "PUT", "/v1/teams/"+me.User.Team+"/quotas", quota, nil); code != 200 {
		t.Fatalf("lifting the team's quota: %d", code)
	}
	return r
}

// tortureFault is one fault at a time into the run: a SIGKILL to a
// random replica, or a crash of PostgreSQL.
type tortureFault struct {
	at time.Duration
	pg bool
}

// planFaults spreads the kills at random over the run and the
// PostgreSQL restarts evenly, in time order.
func planFaults(cfg tortureConfig, rng *mathrand.Rand) []tortureFault {
	var fs []tortureFault
	for range cfg.kills {
		fs = append(fs, tortureFault{at: cfg.duration/20 + time.Duration(rng.Int64N(int64(cfg.duration*9/10)))})
	}
	for i := range cfg.pgRestarts {
		fs = append(fs, tortureFault{at: cfg.duration * time.Duration(i+1) / time.Duration(cfg.pgRestarts+1), pg: true})
	}
	slices.SortFunc(fs, func(a, b tortureFault) int { return int(a.at - b.at) })
	return fs
}

func (r *tortureRun) model() bookingModel {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bookingModel{terms: r.terms, windows: tortureWindows, hours: windowHours, capacity: tortureNodes}
}

func (r *tortureRun) countsLine() string {
	names := make([]string, 0, len(r.counts))
	for n := range r.counts {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", n, r.counts[n])
	}
	return b.String()
}

// keepLogs copies the replicas' logs where the run keeps them with
// -artifacts.
func keepLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "replica-*.log"))
	out := t.ArtifactDir()
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			os.WriteFile(filepath.Join(out, filepath.Base(l)), data, 0o600)
		}
	}
	t.Logf("the replicas' logs are in %s (kept with -artifacts)", out)
}
