package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
	"capblock/internal/store/sqlite"
)

// lockScenario runs services on the health fleet (three whole H100
// nodes) over stores checked against the lock, each violation recorded
// in log, and fails the test at its end when there is one.
type lockScenario struct {
	t   *testing.T
	log lockViolations
}

func newLockScenario(t *testing.T) *lockScenario {
	sc := &lockScenario{t: t}
	t.Cleanup(func() {
		for _, v := range sc.log.list() {
			t.Errorf("%s", v)
		}
	})
	return sc
}

// service is a service on st, seen through the check, on a simulated
// clock at healthT0.
func (sc *lockScenario) service(st store.Full) *Service {
	sc.t.Helper()
	svc, err := New(sc.t.Context(), Config{Fleet: healthFleet(), Store: checkedStoreOf(st, &sc.log), Clock: clock.NewSim(healthT0),
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		sc.t.Fatal(err)
	}
	return svc
}

// buy buys count instances of typ for d, starting from from after
// healthT0, on svc for team; it forgets the cached accounts first, so
// that the purchase reads them from the store.
func (sc *lockScenario) buy(svc *Service, team, typ string, count int, from, d time.Duration) (core.Block, error) {
	sc.t.Helper()
	svc.accounts.forget()
	start := healthT0.Add(from)
	offs, err := svc.Offerings(sc.t.Context(), core.SearchRequest{Types: []string{typ}, Count: count, Duration: d,
		StartAfter: start, EndBefore: start.Add(d)})
	if err != nil {
		return core.Block{}, err
	}
	if len(offs) == 0 {
		return core.Block{}, core.ErrNoCapacity
	}
	b, _, err := svc.Purchase(sc.t.Context(), contract.PurchaseRequest{Team: team, OfferingID: offs[0].ID, ClientToken: newID("tok")})
	return b, err
}

// mustBuy is buy, failing the test on an error.
func (sc *lockScenario) mustBuy(svc *Service, team, typ string, count int, from, d time.Duration) core.Block {
	sc.t.Helper()
	b, err := sc.buy(svc, team, typ, count, from, d)
	if err != nil {
		sc.t.Fatalf("buying %d %s from +%s for %s: %v", count, typ, from, d, err)
	}
	return b
}

// buyPlan buys a plan of one h100.8x over the given windows (from, to
// after healthT0).
func (sc *lockScenario) buyPlan(svc *Service, team string, windows ...[2]time.Duration) contract.PlanView {
	sc.t.Helper()
	svc.accounts.forget()
	o := core.PlanOffering{Target: core.TargetTrainingJob, InstanceType: "h100.8x", Count: 1, Zone: "z", ExpiresAt: svc.clock.Now().Add(10 * time.Minute)}
	for _, w := range windows {
		o.Segments = append(o.Segments, core.PlanSegment{Start: healthT0.Add(w[0]), End: healthT0.Add(w[1]),
			Fee: core.Money{Minor: 100, Currency: "USD"}, OnDemandFee: core.Money{Minor: 200, Currency: "USD"}})
	}
	o.Sign(svc.secret)
	v, _, err := svc.PurchasePlan(sc.t.Context(), contract.PlanPurchaseRequest{Team: team, OfferingID: o.ID, ClientToken: newID("tok")})
	if err != nil {
		sc.t.Fatalf("buying a plan: %v", err)
	}
	return v
}

// counted is what counter c counted, in its series with a label of value
// label (in all of them when label is "").
func counted(t *testing.T, c prometheus.Collector, label string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == label
			}
			if match {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// advance moves svc's simulated clock by d, which reconciles on it.
func advance(t *testing.T, svc *Service, d time.Duration) error {
	t.Helper()
	svc.accounts.forget()
	_, err := svc.SimClock().Advance(d)
	return err
}

// TestNoStoreCallUnderTheLock: no use case reads or writes the store
// while it holds the service's lock exclusively. Services on SQLite and
// on PostgreSQL go through purchases, extensions, plans and their
// lifecycle steps, cancellations, hand-overs, a node's failure and
// replacement, conflicts with another service's commits (a catch-up, a
// reconcile's rebuild), the daily rebase and, on PostgreSQL, lost
// watches; their stores are checked against the lock at every call.
func TestNoStoreCallUnderTheLock(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		sc := newLockScenario(t)
		path := filepath.Join(t.TempDir(), "lock.db")
		open := func() store.Full {
			st, err := sqlite.Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		a, b := sc.service(open()), sc.service(open()) // b sees none of a's commits
		tm, err := a.CreateTeam(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		team := tm.ID
		ctx := t.Context()

		// 1. Purchases, an extension, plans.
		x := sc.mustBuy(a, team, "h100.8x", 1, 2*time.Hour, 4*time.Hour)
		a.accounts.forget()
		exts, err := a.ExtensionOfferings(ctx, team, x.ID, 2*time.Hour)
		if err != nil || len(exts) == 0 {
			t.Fatalf("extension offerings: %v, %v", exts, err)
		}
		a.accounts.forget()
		if _, err := a.Extend(ctx, team, x.ID, exts[0].ID); err != nil {
			t.Fatalf("extending: %v", err)
		}
		y := sc.mustBuy(a, team, "h100.1x", 2, 26*time.Hour, 4*time.Hour)
		z := sc.mustBuy(a, team, "h100.8x", 1, 20*time.Hour, 4*time.Hour)
		plan1 := sc.buyPlan(a, team, [2]time.Duration{3 * time.Hour, 5 * time.Hour}, [2]time.Duration{8 * time.Hour, 10 * time.Hour})
		plan2 := sc.buyPlan(a, team, [2]time.Duration{12 * time.Hour, 14 * time.Hour}, [2]time.Duration{16 * time.Hour, 18 * time.Hour})

		// 2. Lifecycle steps, of a plan's segment too.
		if err := advance(t, a, 3*time.Hour); err != nil {
			t.Fatalf("reconciling: %v", err)
		}
		// 3. A node's failure moves the active block; its recovery.
		node := x.Placements[0].Node
		if rep, err := a.FailNode(ctx, node, "test"); err != nil || len(rep.Replaced) == 0 {
			t.Fatalf("failing %s: %+v, %v", node, rep, err)
		}
		if _, err := a.RecoverNode(ctx, node); err != nil {
			t.Fatal(err)
		}
		// 4. Cancellations, of a block, a plan's segment, a plan; a
		//    release, and a cancellation it refuses.
		for _, id := range []string{y.ID, plan1.Plan.Segments[1].ID} {
			a.accounts.forget()
			if _, err := a.CancelBlock(ctx, team, id); err != nil {
				t.Fatalf("cancelling %s: %v", id, err)
			}
		}
		a.accounts.forget()
		if _, err := a.CancelPlan(ctx, team, plan2.Plan.ID); err != nil {
			t.Fatalf("cancelling plan %s: %v", plan2.Plan.ID, err)
		}
		a.accounts.forget()
		if _, err := a.ReleaseBlock(ctx, team, z.ID); err != nil {
			t.Fatalf("releasing %s: %v", z.ID, err)
		}
		a.accounts.forget()
		if _, err := a.CancelBlock(ctx, team, z.ID); !errors.Is(err, core.ErrInvalidState) {
			t.Fatalf("cancelling the released %s: %v, want it refused", z.ID, err)
		}

		// 5. A conflict with a's commits: b, which saw none of them, buys
		//    what a holds, and catches up by a rebuild of its index.
		var held []core.Block
		for range 3 {
			held = append(held, sc.mustBuy(a, team, "h100.8x", 1, 10*time.Hour, 4*time.Hour))
		}
		if _, err := sc.buy(b, team, "h100.8x", 1, 10*time.Hour, 4*time.Hour); !errors.Is(err, core.ErrNoCapacity) {
			t.Fatalf("b buying what a holds: %v, want no capacity once caught up", err)
		}
		if n := counted(t, b.metrics.catchUps, "rebuild"); n < 1 {
			t.Errorf("b caught up by a rebuild %v times, want at least once", n)
		}
		// 6. A conflict of b's lifecycle steps: a cancels a block that b
		//    would activate; b's reconcile (before any rebase is due)
		//    conflicts and rebuilds. The clock's move answers the time
		//    all the same (the reconcile's failure is the leader's to
		//    retry).
		a.accounts.forget()
		if _, err := a.CancelBlock(ctx, team, held[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := advance(t, b, 10*time.Hour); err != nil {
			t.Fatalf("b's clock move, its reconcile conflicting: %v", err)
		}
		b.mu.RLock()
		_, still := b.index.Block(held[0].ID)
		b.mu.RUnlock()
		if still {
			t.Errorf("b's index still holds %s, cancelled by a, after its rebuild", held[0].ID)
		}
		// 7. The daily rebase.
		if err := advance(t, a, rebaseAfter+time.Hour); err != nil {
			t.Fatalf("reconciling a day later: %v", err)
		}
		a.mu.RLock()
		origin := a.index.Origin
		a.mu.RUnlock()
		if origin.Before(a.clock.Now().Add(-time.Hour)) {
			t.Errorf("the index's hour 0 is %s, a day before now %s: not rebased", origin, a.clock.Now())
		}
	})

	t.Run("postgres", func(t *testing.T) {
		sc := newLockScenario(t)
		dsn := pgtest.Start(t).NewDatabase(t)
		open := func() *postgres.Store {
			st, err := postgres.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		// 1. Two replicas that follow each other (each starts with a
		//    lost watch, reloaded), and one that does not.
		r1, r2, r3 := sc.service(open()), sc.service(open()), sc.service(open())
		for _, r := range []*Service{r1, r2} {
			runService(t, r)
			waitFor(t, 20*time.Second, "the replica's watch to listen", func() bool { return watchListened(t, r) })
		}
		tm, err := r1.CreateTeam(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		team := tm.ID
		ctx := t.Context()

		// 2. Purchases of the same hours on both at once: conflicts,
		//    caught up through the watch.
		for round := range 3 {
			var wg sync.WaitGroup
			for _, r := range []*Service{r1, r2, r1, r2} {
				wg.Go(func() {
					_, err := sc.buy(r, team, "h100.8x", 1, time.Duration(2+4*round)*time.Hour, 4*time.Hour)
					if err != nil && !errors.Is(err, core.ErrNoCapacity) && !errors.Is(err, core.ErrConflict) {
						t.Errorf("buying at once: %v", err)
					}
				})
			}
			wg.Wait()
		}
		// 3. The replica that does not follow catches up by a rebuild.
		for range 3 {
			sc.mustBuy(r1, team, "h100.8x", 1, 30*time.Hour, 4*time.Hour)
		}
		if _, err := sc.buy(r3, team, "h100.8x", 1, 30*time.Hour, 4*time.Hour); !errors.Is(err, core.ErrNoCapacity) {
			t.Fatalf("buying what the others hold: %v, want no capacity once caught up", err)
		}
		if n := counted(t, r3.metrics.catchUps, "rebuild"); n < 1 {
			t.Errorf("the replica that does not follow caught up by a rebuild %v times, want at least once", n)
		}
		// 4. A node's failure on one replica, seen by the other.
		if _, err := r1.FailNode(ctx, "n0", "test"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "replica 2 to see n0 failed", func() bool {
			return healthOfNodes(r2)["n0"].Health == core.Unhealthy
		})
		if _, err := r2.RecoverNode(ctx, "n0"); err != nil {
			t.Fatal(err)
		}
		// 5. A watch lost while it runs: its connection ends, and the
		//    replicas reload what they may have missed.
		lost := counted(t, r1.metrics.watchLost, "") + counted(t, r2.metrics.watchLost, "")
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(context.Background())
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "a replica to listen again", func() bool {
			return counted(t, r1.metrics.watchLost, "")+counted(t, r2.metrics.watchLost, "") > lost
		})
		// 6. Lifecycle steps on the leader, and the daily rebase.
		var leader *Service
		waitFor(t, 20*time.Second, "a leader", func() bool {
			for _, r := range []*Service{r1, r2} {
				if r.Leading() {
					leader = r
				}
			}
			return leader != nil
		})
		for _, d := range []time.Duration{3 * time.Hour, rebaseAfter + time.Hour} {
			if err := advance(t, leader, d); err != nil && !store.IsConflict(err) {
				t.Fatalf("reconciling on the leader: %v", err)
			}
		}
	})
}

// churnStore is a store whose reads of the live blocks, once armed, each
// run during first on the service first churns times, so that what they
// read is stale when the read ends, and then during on the read after.
type churnStore struct {
	store.Full
	mu     sync.Mutex
	churns int
	first  func()
	during func()
}

func (c *churnStore) ListBlocks(ctx context.Context, f store.BlockFilter) ([]core.Block, error) {
	blocks, err := c.Full.ListBlocks(ctx, f)
	c.mu.Lock()
	first, during := c.first, c.during
	switch {
	case c.churns > 0:
		c.churns--
		during = nil
	case during != nil:
		first, c.during = nil, nil
	default:
		first = nil
	}
	c.mu.Unlock()
	if first != nil {
		first()
	}
	if during != nil {
		during()
	}
	return blocks, err
}

// TestReindexHoldsDecisionsBack: a rebuild of the index whose index
// changes each time it reads the store gives up swapping in what it read
// after reindexTries, and reads once more with the other decisions held
// back: searches go on meanwhile, a purchase waits for the swap, and the
// new index holds every block bought. No store method runs under the
// exclusive lock throughout.
func TestReindexHoldsDecisionsBack(t *testing.T) {
	sc := newLockScenario(t)
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "churn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	churn := &churnStore{Full: st}
	svc := sc.service(churn)
	tm, err := svc.CreateTeam(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var bought []string
	hour := time.Duration(0)
	buy := func() {
		hour += 4 * time.Hour
		bought = append(bought, sc.mustBuy(svc, tm.ID, "h100.8x", 1, hour, 4*time.Hour).ID)
	}
	purchased := make(chan error, 1)
	churn.churns, churn.first = reindexTries, buy
	churn.during = func() {
		// Held back: the rebuild reads the store with the lock held apart.
		searched := make(chan error, 1)
		go func() {
			_, err := svc.Offerings(context.Background(), core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: time.Hour,
				StartAfter: healthT0.Add(time.Hour), EndBefore: healthT0.Add(100 * time.Hour)})
			searched <- err
		}()
		select {
		case err := <-searched:
			if err != nil {
				t.Errorf("a search during the rebuild: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("a search waited for the rebuild's read of the store")
		}
		hour += 4 * time.Hour
		go func() {
			b, err := sc.buy(svc, tm.ID, "h100.8x", 1, hour, 4*time.Hour)
			if err == nil {
				bought = append(bought, b.ID) // read once purchased has been
			}
			purchased <- err
		}()
	}
	if err := svc.reindex(t.Context(), reindexing{why: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := <-purchased; err != nil {
		t.Fatalf("a purchase during the rebuild: %v", err)
	}
	if len(bought) != reindexTries+1 {
		t.Fatalf("%d blocks bought, want %d", len(bought), reindexTries+1)
	}
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	var missing []string
	for _, id := range bought {
		if _, ok := svc.index.Block(id); !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the rebuilt index lacks %s", strings.Join(missing, ", "))
	}
}
