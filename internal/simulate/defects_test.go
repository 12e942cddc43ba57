package simulate_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/cryptotest"
	"time"

	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/service"
	"capblock/internal/simulate"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// Defects the simulation found, each shown by a scenario of its own,
// small enough to read: each is skipped, naming the defect, until it is
// mended.

// answerLost is a store whose Commit, when lose is set, stores the change
// and then answers an error, as a reply lost after the fsync would.
type answerLost struct {
	store.Full
	lose bool
}

var errAnswerLost = errors.New("the change is durable, its answer was lost")

func (s *answerLost) Commit(ctx context.Context, c store.Change) error {
	if err := s.Full.Commit(ctx, c); err != nil || !s.lose {
		return err
	}
	s.lose = false
	return errAnswerLost
}

// lostAnswerEnv is a service on two H100 nodes over an answerLost store,
// a team and its member.
type lostAnswerEnv struct {
	t      *testing.T
	st     *answerLost
	sim    *clock.Sim
	svc    *service.Service
	member context.Context
	admin  context.Context
	team   string
}

func newLostAnswerEnv(t *testing.T) *lostAnswerEnv {
	t.Helper()
	ctx := t.Context()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	for _, n := range []string{"h0", "h1"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z1", Rack: "r0", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	e := &lostAnswerEnv{t: t, st: &answerLost{Full: db}, sim: clock.NewSim(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	e.svc, err = service.New(ctx, service.Config{Fleet: f, Store: e.st, Backend: local.NewSim(slog.New(slog.DiscardHandler), f.Nodes),
		Clock: e.sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := e.svc.CreateTeam(ctx, "ops")
	e.must(err)
	root, err := e.svc.CreateUser(ctx, "root", ops.ID, core.RoleAdmin)
	e.must(err)
	tm, err := e.svc.CreateTeam(ctx, "alpha")
	e.must(err)
	dev, err := e.svc.CreateUser(ctx, "dev", tm.ID, core.RoleMember)
	e.must(err)
	e.team = tm.ID
	e.admin = contract.WithPrincipal(ctx, core.Principal{User: root})
	e.member = contract.WithPrincipal(ctx, core.Principal{User: dev})
	return e
}

func (e *lostAnswerEnv) must(err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
}

// buyLost buys both nodes for hours 2 to 5, the purchase's commit
// losing its answer: the service finds its block by the client token
// and answers with it, as it should.
func (e *lostAnswerEnv) buyLost() core.Block {
	e.t.Helper()
	g := e.svc.Guarded()
	now := e.sim.Now()
	offs, err := g.Offerings(e.member, core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 3 * time.Hour,
		StartAfter: now.Add(2 * time.Hour), EndBefore: now.Add(5 * time.Hour), Team: e.team})
	e.must(err)
	if len(offs) == 0 {
		e.t.Fatal("no offering on an empty fleet")
	}
	e.st.lose = true
	b, _, err := g.Purchase(e.member, contract.PurchaseRequest{Team: e.team, OfferingID: offs[0].ID, ClientToken: "t1"})
	if err != nil {
		e.t.Fatalf("the purchase whose answer was lost: %v; want the block its client token bought", err)
	}
	return b
}

// TestLostCommitAnswerIndex: when a commit is durable but its answer is
// lost, the service forgets the decision on its index (settle with the
// error), although the store holds it. The index then lacks the block
// (or holds an older version of it) until something rebuilds it (a
// conflict in another commit, the daily rebase, a restart). Meanwhile:
// the block's extension offerings answer a conflict, its GPUs are
// offered to others, and its lifecycle steps are not taken.
func TestLostCommitAnswerIndex(t *testing.T) {
	t.Skip("defect: a commit whose answer is lost after it is durable leaves the index without the change (service.settle forgets it); see the subtests")
	t.Run("extension offerings answer a conflict", func(t *testing.T) {
		e := newLostAnswerEnv(t)
		b := e.buyLost()
		_, err := e.svc.Guarded().ExtensionOfferings(e.member, e.team, b.ID, time.Hour)
		if err != nil {
			t.Errorf("extension offerings of block %s: %v; want offerings, or none", b.ID, err)
		}
	})
	t.Run("its GPUs are offered again", func(t *testing.T) {
		e := newLostAnswerEnv(t)
		b := e.buyLost()
		offs, err := e.svc.Guarded().Offerings(e.member, core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 3 * time.Hour,
			StartAfter: b.Start, EndBefore: b.End, Team: e.team})
		e.must(err)
		if len(offs) > 0 {
			t.Errorf("both nodes are %s's over [%s, %s), yet a search offers them: %+v", b.ID, b.Start, b.End, offs[0])
		}
	})
	t.Run("it never becomes active", func(t *testing.T) {
		e := newLostAnswerEnv(t)
		b := e.buyLost()
		_, err := e.svc.Guarded().SetClock(e.admin, contract.ClockRequest{Set: b.Start.Add(time.Hour)})
		e.must(err)
		e.must(e.svc.LeadOnce(t.Context()))
		got, err := e.st.GetBlock(t.Context(), b.ID)
		e.must(err)
		if got.State != core.StateActive {
			t.Errorf("block %s started an hour ago and the leader reconciled; it is %s, want active", b.ID, got.State)
		}
	})
}

// TestSimulateLostCommitAnswers runs the simulation with commits that
// lose their answers, which TestSimulate leaves out until the defect
// above is mended.
func TestSimulateLostCommitAnswers(t *testing.T) {
	t.Skip("defect: a commit whose answer is lost after it is durable leaves the index without the change (TestLostCommitAnswerIndex)")
	dir := memDir(t)
	for seed := uint64(1); seed <= 4; seed++ {
		cryptotest.SetGlobalRandom(t, seed)
		if _, err := simulate.Run(t.Context(), simulate.Config{Seed: seed, Ops: 2000, Dir: dir, Faults: simulate.DefaultFaults}); err != nil {
			t.Errorf("%v\nreplay: CAPBLOCK_SIM_FAULTS=commit-lost=%g %s", err, simulate.DefaultFaults.CommitLosesAnswer, replay(seed, 2000))
		}
	}
}
