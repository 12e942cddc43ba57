package service

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// handonEnv is a service on two whole-node H100 nodes (n0, n1), a SQLite
// file and a simulated clock at planT0, with three teams a, b and c
// (their ids in team).
type handonEnv struct {
	t    *testing.T
	svc  *Service
	st   *sqlite.Store
	sim  *clock.Sim
	team map[string]string
	buys int
}

func newHandonEnv(t *testing.T, limits func(*core.Limits)) *handonEnv {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "handon.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	if limits != nil {
		limits(&f.Limits)
	}
	for _, n := range []string{"n0", "n1"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	sim := clock.NewSim(planT0)
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e := &handonEnv{t: t, svc: svc, st: st, sim: sim, team: map[string]string{}}
	for _, name := range []string{"a", "b", "c"} {
		tm, err := svc.CreateTeam(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		e.team[name] = tm.ID
	}
	return e
}

// offers searches one h100.8x for hours hours within [from, to) (hours
// from planT0) for team.
func (e *handonEnv) offers(team string, hours, from, to int) []core.Offering {
	e.t.Helper()
	offs, err := e.svc.Offerings(e.t.Context(), core.SearchRequest{Types: []string{"h100.8x"}, Count: 1,
		Duration: time.Duration(hours) * time.Hour, StartAfter: planHour(from), EndBefore: planHour(to), Team: e.team[team]})
	if err != nil {
		e.t.Fatal(err)
	}
	return offs
}

// buy buys the first offering of one h100.8x for hours hours starting at
// hour from, for team.
func (e *handonEnv) buy(team string, hours, from int) core.Block {
	e.t.Helper()
	offs := e.offers(team, hours, from, from+hours)
	if len(offs) == 0 || !offs[0].Start.Equal(planHour(from)) {
		e.t.Fatalf("no offering of %dh at hour %d for team %s: %+v", hours, from, team, offs)
	}
	e.buys++
	b, _, err := e.svc.Purchase(e.t.Context(), contract.PurchaseRequest{Team: e.team[team], OfferingID: offs[0].ID, ClientToken: fmt.Sprint("tok-", e.buys)})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// at moves the clock to hour h plus extra and reconciles.
func (e *handonEnv) at(h int, extra time.Duration) {
	e.t.Helper()
	if _, err := e.sim.Set(planHour(h).Add(extra)); err != nil {
		e.t.Fatal(err)
	}
	if err := e.svc.Reconcile(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// ledger is a team's entries as "kind subject minor" lines, sorted.
func (e *handonEnv) ledger(team string) []string {
	e.t.Helper()
	entries, err := e.st.Ledger(e.t.Context(), e.team[team])
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, l := range entries {
		out = append(out, fmt.Sprintf("%s %s %d", l.Kind, l.Subject, l.Amount.Minor))
	}
	sort.Strings(out) // entries of one instant come in id order
	return out
}

// eventTypes is the types of a team's events, in order.
func (e *handonEnv) eventTypes(team string) []string {
	e.t.Helper()
	evs, err := e.st.Events(e.t.Context(), e.team[team], 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func allowAny(l *core.Limits) { l.Transfers = core.TransfersAny }

// TestTransferActiveBlockWithPrice: a block 2.5 hours into its 10 is
// transferred for 500.00: the holder keeps it until the next whole hour,
// the receiver gets the same GPUs for the 7 hours left, is charged the
// price and the holder credited it; the fee stays with the holder, who
// can no longer cancel what it kept; both teams hear of it.
func TestTransferActiveBlockWithPrice(t *testing.T) {
	e := newHandonEnv(t, allowAny)
	ctx := t.Context()
	b := e.buy("a", 10, 2)
	e.at(4, 30*time.Minute)

	res, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: e.team["b"],
		Price: core.Money{Minor: 50_000, Currency: "USD"}})
	if err != nil {
		t.Fatal(err)
	}
	// 1. The split: the holder's block ends at hour 5, the receiver's
	//    starts there on the same GPUs, its fee the share of 7 hours.
	if res.Block.State != core.StateActive || !res.Block.End.Equal(planHour(5)) || res.Block.Fee != b.Fee {
		t.Errorf("holder's block: %s until %s, fee %s; want active until hour 5, fee %s", res.Block.State, res.Block.End, res.Block.Fee, b.Fee)
	}
	recv := res.Received
	wantShare := b.Fee.Minor * 56 / 80
	if recv.Team != e.team["b"] || !recv.Start.Equal(planHour(5)) || !recv.End.Equal(planHour(12)) ||
		recv.State != core.StateScheduled || recv.Fee.Minor != wantShare || !cmp.Equal(recv.Placements, b.Placements) {
		t.Errorf("received block: %+v; want team b's, hours 5 to 12, scheduled, fee %d, on %v", recv, wantShare, b.Placements)
	}
	// 2. Both ledgers, exactly.
	if diff := cmp.Diff([]string{"charge " + b.ID + fmt.Sprint(" ", b.Fee.Minor), "credit " + b.ID + " 50000"}, e.ledger("a")); diff != "" {
		t.Errorf("holder's ledger (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"charge " + recv.ID + " 50000"}, e.ledger("b")); diff != "" {
		t.Errorf("receiver's ledger (-want +got):\n%s", diff)
	}
	// 3. Events for both teams.
	if got := e.eventTypes("a"); got[len(got)-1] != core.EventBlockTransferred {
		t.Errorf("holder's events %v; want block.transferred last", got)
	}
	if got := e.eventTypes("b"); !cmp.Equal(got, []string{core.EventBlockReceived, core.EventBlockScheduled}) {
		t.Errorf("receiver's events %v; want block.received, block.scheduled", got)
	}
	// 4. No second refund of the kept hours, no second hand-over.
	if _, err := e.svc.CancelBlock(ctx, e.team["a"], b.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("cancelling the kept block: %v; want invalid_state", err)
	}
	if _, err := e.svc.ReleaseBlock(ctx, e.team["a"], b.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("releasing the kept block: %v; want invalid_state", err)
	}
	// 5. At hour 5 the holder's block has ended and the receiver's runs.
	e.at(5, 0)
	kept, _ := e.st.GetBlock(ctx, b.ID)
	got, _ := e.st.GetBlock(ctx, recv.ID)
	if kept.State != core.StateExpired || got.State != core.StateActive {
		t.Errorf("at hour 5: holder's block %s, receiver's %s; want expired, active", kept.State, got.State)
	}
	// 6. The block's page shows the transfer to both, the credit to
	//    neither of another team.
	d, err := e.svc.BlockDetail(ctx, e.team["b"], recv.ID)
	if err != nil || len(d.Handovers) != 1 || d.Handovers[0].ToTeam != e.team["b"] || d.Handovers[0].BlockID != "" || d.Handovers[0].GPUHours != 56 {
		t.Errorf("receiver's view of the transfer: %+v, %v", d.Handovers, err)
	}
}

// TestTransferBeforeStartIsFree: a block not yet started moves whole to
// the receiver for nothing: the holder's is cancelled without a refund,
// the fee stays with the holder, the receiver's ledger is empty.
func TestTransferBeforeStartIsFree(t *testing.T) {
	e := newHandonEnv(t, allowAny)
	b := e.buy("a", 6, 3)
	res, err := e.svc.TransferBlock(t.Context(), contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: e.team["b"]})
	if err != nil {
		t.Fatal(err)
	}
	if res.Block.State != core.StateCancelled || !res.Received.Start.Equal(b.Start) || !res.Received.End.Equal(b.End) || res.Received.Fee != b.Fee {
		t.Errorf("holder's %s; received %+v; want cancelled, and the whole block with its fee", res.Block.State, res.Received)
	}
	if diff := cmp.Diff([]string{"charge " + b.ID + fmt.Sprint(" ", b.Fee.Minor)}, e.ledger("a")); diff != "" {
		t.Errorf("holder's ledger (-want +got):\n%s", diff)
	}
	if got := e.ledger("b"); len(got) != 0 {
		t.Errorf("receiver's ledger %v; want empty", got)
	}
	// The capacity is the receiver's: once team c takes the other node,
	// nothing is offered there.
	e.buy("c", 6, 3)
	if offs := e.offers("c", 6, 3, 9); len(offs) != 0 {
		t.Errorf("%d offerings over the window; want none", len(offs))
	}
}

// TestTransferPolicyAndScope: the fleet's policy decides who may
// transfer; another team's block is not found, to transfer or release;
// the receiving team's quota applies; refusals store nothing.
func TestTransferPolicyAndScope(t *testing.T) {
	ctx := t.Context()
	for name, c := range map[string]struct {
		policy string
		scope  string // "" an admin, else the holding team
		want   error
	}{
		"none refuses a member":  {core.TransfersNone, "a", core.ErrForbidden},
		"none refuses an admin":  {core.TransfersNone, "", core.ErrForbidden},
		"admin refuses a member": {core.TransfersAdmin, "a", core.ErrForbidden},
		"admin lets an admin":    {core.TransfersAdmin, "", nil},
		"any lets a member":      {core.TransfersAny, "a", nil},
	} {
		t.Run(name, func(t *testing.T) {
			e := newHandonEnv(t, func(l *core.Limits) { l.Transfers = c.policy })
			b := e.buy("a", 4, 3)
			_, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team[c.scope], BlockID: b.ID, ToTeam: e.team["b"]})
			if !errors.Is(err, c.want) && (c.want != nil || err != nil) {
				t.Fatalf("TransferBlock: %v; want %v", err, c.want)
			}
			if got, _ := e.st.GetBlock(ctx, b.ID); c.want != nil && (got.State != core.StateScheduled || got.Version != 1) {
				t.Errorf("refused, yet the block is %s at version %d", got.State, got.Version)
			}
		})
	}
	t.Run("another team's block", func(t *testing.T) {
		e := newHandonEnv(t, allowAny)
		b := e.buy("a", 4, 3)
		if _, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["b"], BlockID: b.ID, ToTeam: e.team["b"]}); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("team b transferring team a's block: %v; want not found", err)
		}
		if _, err := e.svc.ReleaseBlock(ctx, e.team["b"], b.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("team b releasing team a's block: %v; want not found", err)
		}
		if _, err := e.svc.BlockDetail(ctx, e.team["b"], b.ID); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("team b reading team a's block: %v; want not found", err)
		}
		if _, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: "team-none"}); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("to an unknown team: %v; want not found", err)
		}
		if _, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: e.team["b"],
			Price: core.Money{Minor: -1, Currency: "USD"}}); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("a negative price: %v; want invalid", err)
		}
		if got, _ := e.st.GetBlock(ctx, b.ID); got.Version != 1 {
			t.Errorf("block at version %d after refusals; want 1", got.Version)
		}
	})
	t.Run("the receiver's quota", func(t *testing.T) {
		e := newHandonEnv(t, allowAny)
		if _, err := e.svc.PutQuota(ctx, core.Quota{Team: e.team["b"], InstanceType: "h100.8x", MaxInstancesHeld: 1}); err != nil {
			t.Fatal(err)
		}
		e.buy("b", 4, 3)
		b := e.buy("a", 4, 3)
		_, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: e.team["b"]})
		if !errors.Is(err, core.ErrQuotaExceeded) {
			t.Fatalf("transfer beyond the receiver's quota: %v; want quota_exceeded", err)
		}
		if got, _ := e.st.GetBlock(ctx, b.ID); got.State != core.StateScheduled || got.Version != 1 || got.Team != e.team["a"] {
			t.Errorf("refused, yet the block is %+v", got)
		}
		if _, err := e.svc.TransferBlock(ctx, contract.TransferRequest{Scope: e.team["a"], BlockID: b.ID, ToTeam: e.team["c"]}); err != nil {
			t.Errorf("the same transfer to team c, within its quota: %v", err)
		}
	})
}

// TestReleaseResold: a block released before its start is offered again;
// another team buys 4 of its 10 hours; the holder is credited its fee's
// share of those 32 GPU-hours less the 10% resale fee, and nothing for
// the 48 unsold; no cancellation refund is paid on top.
func TestReleaseResold(t *testing.T) {
	e := newHandonEnv(t, nil)
	ctx := t.Context()
	e.buy("c", 10, 2)
	b := e.buy("a", 10, 2)
	if offs := e.offers("b", 4, 4, 8); len(offs) != 0 {
		t.Fatalf("the fleet is full, yet %d offerings", len(offs))
	}
	res, err := e.svc.ReleaseBlock(ctx, e.team["a"], b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Block.State != core.StateCancelled || res.Handover.GPUHours != 80 || res.Handover.FeePercent != 10 {
		t.Errorf("release: %s, %+v; want cancelled, 80 GPU-hours at a 10%% fee", res.Block.State, res.Handover)
	}
	if diff := cmp.Diff([]string{"charge " + b.ID + fmt.Sprint(" ", b.Fee.Minor)}, e.ledger("a")); diff != "" {
		t.Errorf("holder's ledger after the release (-want +got):\n%s", diff)
	}
	// The search offers the released GPUs; team b buys hours 4 to 8.
	sold := e.buy("b", 4, 4)
	if !cmp.Equal(sold.Placements, b.Placements) {
		t.Fatalf("bought %v; want the released GPUs %v", sold.Placements, b.Placements)
	}
	credit := b.Fee.Minor * 32 * 90 / (80 * 100)
	want := []string{"charge " + b.ID + fmt.Sprint(" ", b.Fee.Minor), "credit " + b.ID + fmt.Sprint(" ", credit)}
	if diff := cmp.Diff(want, e.ledger("a")); diff != "" {
		t.Errorf("holder's ledger after the resale (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"charge " + sold.ID + fmt.Sprint(" ", sold.Fee.Minor)}, e.ledger("b")); diff != "" {
		t.Errorf("buyer's ledger (-want +got):\n%s", diff)
	}
	d, err := e.svc.BlockDetail(ctx, e.team["a"], b.ID)
	if err != nil || len(d.Handovers) != 1 || d.Handovers[0].ResoldGPUHours != 32 || d.Handovers[0].Credited.Minor != credit {
		t.Errorf("holder's view: %+v, %v; want 32 GPU-hours resold, %d credited", d.Handovers, err, credit)
	}
	if got := e.eventTypes("a"); got[len(got)-1] != core.EventBlockResold {
		t.Errorf("holder's events %v; want block.resold last", got)
	}
	// The rest of the hours go unsold: the clock passes the block's end
	// and nothing more is credited.
	e.at(13, 0)
	if got := e.ledger("a"); len(got) != 2 {
		t.Errorf("holder's ledger %v; want the charge and the one credit", got)
	}
}

// TestReleaseActiveBlock: an active block released keeps its hours until
// the next whole hour, and a purchase after that credits the holder.
func TestReleaseActiveBlock(t *testing.T) {
	e := newHandonEnv(t, func(l *core.Limits) { l.ResaleFeePercent = 25 })
	ctx := t.Context()
	e.buy("c", 10, 2)
	b := e.buy("a", 10, 2)
	e.at(3, 10*time.Minute)
	res, err := e.svc.ReleaseBlock(ctx, e.team["a"], b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Block.State != core.StateActive || !res.Block.End.Equal(planHour(4)) || res.Handover.GPUHours != 64 {
		t.Errorf("release: %s until %s, %d GPU-hours; want active until hour 4, 64", res.Block.State, res.Block.End, res.Handover.GPUHours)
	}
	sold := e.buy("b", 8, 4)
	credit := b.Fee.Minor * 64 * 75 / (80 * 100)
	if got := e.ledger("a"); len(got) != 2 || got[1] != fmt.Sprintf("credit %s %d", b.ID, credit) {
		t.Errorf("holder's ledger %v; want a credit of %d for the 64 GPU-hours resold", got, credit)
	}
	if sold.Team != e.team["b"] {
		t.Errorf("bought by %s", sold.Team)
	}
}

// TestUtilisationWeek scripts a week of a block of 8 GPUs: jobs run 20,
// 10 and 50 hours of it through the job runner on a simulated clock; at
// hour 120 and after the week the figures are exact.
func TestUtilisationWeek(t *testing.T) {
	ctx := t.Context()
	svc, rec, st := weekRunner(t)
	sim := svc.clock.(*clock.Sim)
	set := func(h int) {
		t.Helper()
		if _, err := sim.Set(planHour(h)); err != nil {
			t.Fatal(err)
		}
	}
	// A job runs from hour from; at hour to (unless negative) its one
	// instance exits with code 0 and the job succeeds.
	end := func(id string, to int) {
		t.Helper()
		set(to)
		rec.exits <- backend.InstanceExit{JobID: id + "/1", Instance: 0, Code: 0}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if j, err := st.Job(ctx, id); err == nil && j.State == core.JobSucceeded {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("job %s: %+v, %v; want it succeeded", id, j, err)
			}
		}
	}
	run := func(from, to int) string {
		t.Helper()
		set(from)
		j, err := svc.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-w", Command: []string{"train"}})
		if err != nil {
			t.Fatal(err)
		}
		rec.next(t, 1) // started
		<-rec.starts
		if to >= 0 {
			end(j.ID, to)
		}
		return j.ID
	}
	run(10, 30)
	run(50, 60)
	last := run(100, -1)
	set(120)
	got, err := svc.Utilisation(ctx, "t", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := contract.GPUHours{Reserved: 960, Used: 400, Idle: 560}
	if diff := cmp.Diff(want, got.Total); diff != "" {
		t.Errorf("at hour 120 (-want +got):\n%s", diff)
	}
	end(last, 150)
	set(170)
	got, err = svc.Utilisation(ctx, "t", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want = contract.GPUHours{Reserved: 1344, Used: 640, Idle: 704}
	if diff := cmp.Diff(want, got.Total); diff != "" {
		t.Errorf("after the week (-want +got):\n%s", diff)
	}
	if len(got.Blocks) != 1 || got.Blocks[0].BlockID != "cb-w" || len(got.Teams) != 1 || got.Teams[0].GPUHours != want {
		t.Errorf("rows: %+v", got)
	}
	d, err := svc.BlockDetail(ctx, "t", "cb-w")
	if err != nil || d.Utilisation != want {
		t.Errorf("the block's utilisation: %+v, %v; want %+v", d.Utilisation, err, want)
	}
	// The spend report splits it by month: the week is all December.
	rep, err := svc.Spend(ctx, "t", "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Month != "2026-12" || rep.Rows[0].GPUHours != want || rep.Total.GPUHours != want {
		t.Errorf("spend: %+v; want one December row with %+v", rep, want)
	}
	// A window: the first day holds 24 reserved hours and job 1's 14.
	day, err := svc.Utilisation(ctx, "t", "", planHour(0), planHour(24))
	if err != nil {
		t.Fatal(err)
	}
	if want := (contract.GPUHours{Reserved: 192, Used: 112, Idle: 80}); day.Total != want {
		t.Errorf("first day: %+v; want %+v", day.Total, want)
	}
}

// weekRunner is a service on a SQLite file with one active block, cb-w,
// of one h100.8x from planT0 for a week, team t's, whose jobs run on a
// recording engine; the service leads until the test ends.
func weekRunner(t *testing.T) (*Service, *recordedWorkloads, *sqlite.Store) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "week.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := core.Block{ID: "cb-w", Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "z",
		Start: planHour(0), End: planHour(168), State: core.StateActive, CreatedAt: planT0.Add(-2 * time.Hour),
		Fee:        core.Money{Minor: 1, Currency: "USD"},
		Placements: []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{b}}); err != nil {
		t.Fatal(err)
	}
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	f.Nodes = []core.Node{{Name: "n0", Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy}}
	rec := newRecordedWorkloads()
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(planT0), Log: slog.New(slog.DiscardHandler), Workloads: rec})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, svc)
	return svc, rec, st
}

// TestReleaseResoldToAPlan: a plan whose two segments land on released
// GPUs credits the holder once, for both.
func TestReleaseResoldToAPlan(t *testing.T) {
	e := newHandonEnv(t, nil)
	ctx := t.Context()
	e.buy("c", 10, 2)
	b := e.buy("a", 10, 2)
	if _, err := e.svc.ReleaseBlock(ctx, e.team["a"], b.ID); err != nil {
		t.Fatal(err)
	}
	o := core.PlanOffering{Target: core.TargetTrainingJob, InstanceType: "h100.8x", Count: 1, Zone: "z", ExpiresAt: e.sim.Now().Add(10 * time.Minute)}
	for _, r := range [][2]int{{3, 5}, {7, 9}} {
		o.Segments = append(o.Segments, core.PlanSegment{Start: planHour(r[0]), End: planHour(r[1]),
			Fee: core.Money{Minor: 100, Currency: "USD"}, OnDemandFee: core.Money{Minor: 200, Currency: "USD"}})
	}
	o.Sign(e.svc.secret)
	if _, _, err := e.svc.PurchasePlan(ctx, contract.PlanPurchaseRequest{Team: e.team["b"], OfferingID: o.ID, ClientToken: "plan-1"}); err != nil {
		t.Fatal(err)
	}
	credit := b.Fee.Minor * 32 * 90 / (80 * 100)
	want := []string{"charge " + b.ID + fmt.Sprint(" ", b.Fee.Minor), "credit " + b.ID + fmt.Sprint(" ", credit)}
	if diff := cmp.Diff(want, e.ledger("a")); diff != "" {
		t.Errorf("holder's ledger (-want +got):\n%s", diff)
	}
}
