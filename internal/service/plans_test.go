package service

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

var planT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func planHour(h int) time.Time { return planT0.Add(time.Duration(h) * time.Hour) }

// planEnv is a service on two H100 nodes, n0 and n1 (one pool), with
// blocks stored before it starts, on a simulated clock at planT0.
type planEnv struct {
	t   *testing.T
	svc *Service
	st  *sqlite.Store
	sim *clock.Sim
}

func newPlanEnv(t *testing.T, blocks ...core.Block) *planEnv {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Commit(ctx, store.Change{Insert: blocks}); err != nil {
		t.Fatal(err)
	}
	f := planFleet()
	sim := clock.NewSim(planT0)
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &planEnv{t: t, svc: svc, st: st, sim: sim}
}

// planFleet is the plan tests' fleet: two 8-GPU H100 nodes, n0 and n1,
// sold whole as h100.8x.
func planFleet() core.Fleet {
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	for _, n := range []string{"n0", "n1"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	return f
}

// wholeNode is a scheduled block of one whole node over [from, to).
func wholeNode(id, node string, from, to int) core.Block {
	return core.Block{ID: id, Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "z",
		Start: planHour(from), End: planHour(to), State: core.StateScheduled, CreatedAt: planT0,
		Fee:        core.Money{Minor: 1, Currency: "USD"},
		Placements: []core.Placement{{Node: node, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
}

// offer signs a plan offering of one h100.8x over the given hour ranges.
func (e *planEnv) offer(ranges ...[2]int) string {
	o := core.PlanOffering{Target: core.TargetTrainingJob, InstanceType: "h100.8x", Count: 1, Zone: "z", ExpiresAt: e.sim.Now().Add(10 * time.Minute)}
	for _, r := range ranges {
		o.Segments = append(o.Segments, core.PlanSegment{Start: planHour(r[0]), End: planHour(r[1]),
			Fee: core.Money{Minor: 100, Currency: "USD"}, OnDemandFee: core.Money{Minor: 200, Currency: "USD"}})
	}
	o.Sign(e.svc.secret)
	return o.ID
}

func (e *planEnv) nodesOf(id string) []string {
	e.t.Helper()
	b, err := e.st.GetBlock(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return nodeNames(b.Placements)
}

// TestPurchasePlanRepacks: a segment that fits the hourly count but no
// node's free time moves a tentative block, in the plan's commit.
func TestPurchasePlanRepacks(t *testing.T) {
	// n0 is taken over [5, 15), n1 over [15, 25): no node is free over
	// [10, 20), though one node is at every hour.
	e := newPlanEnv(t, wholeNode("cb-a", "n0", 5, 15), wholeNode("cb-b", "n1", 15, 25))
	v, created, err := e.svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: "t", OfferingID: e.offer([2]int{10, 20}, [2]int{30, 40}), ClientToken: "p1"})
	if err != nil || !created {
		t.Fatalf("PurchasePlan: %v, created %v", err, created)
	}
	if v.State != core.PlanScheduled || len(v.Plan.Segments) != 2 {
		t.Fatalf("plan %+v", v)
	}
	if diff := cmp.Diff([]string{"n1"}, e.nodesOf(v.Plan.Segments[0].ID)); diff != "" {
		t.Errorf("segment 1 nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n0"}, e.nodesOf("cb-b")); diff != "" {
		t.Errorf("moved block's nodes (-want +got):\n%s", diff)
	}
	events, err := e.st.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type+" "+ev.Subject[:3])
	}
	want := []string{"block.purchased cb-", "block.scheduled cb-", "block.purchased cb-", "block.scheduled cb-", "plan.scheduled tp-", "block.moved cb-"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestPurchasePlanRefusedLeavesIndex: when a later segment does not fit,
// nothing is stored and the index is as it was, the block that the first
// segment moved included.
func TestPurchasePlanRefusedLeavesIndex(t *testing.T) {
	full := wholeNode("cb-c", "n0", 30, 40)
	full.Count, full.Placements = 2, append(full.Placements, core.Placement{Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	e := newPlanEnv(t, wholeNode("cb-a", "n0", 5, 15), wholeNode("cb-b", "n1", 15, 25), full)
	_, _, err := e.svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: "t", OfferingID: e.offer([2]int{10, 20}, [2]int{30, 40}), ClientToken: "p1"})
	if !errors.Is(err, core.ErrNoCapacity) {
		t.Fatalf("PurchasePlan: %v, want no capacity", err)
	}
	if ids := len(e.svc.index.Blocks()); ids != 3 {
		t.Errorf("%d blocks indexed, want the 3 stored", ids)
	}
	b, _ := e.svc.index.Block("cb-b")
	if diff := cmp.Diff([]string{"n1"}, nodeNames(b.Placements)); diff != "" {
		t.Errorf("indexed cb-b (-want +got):\n%s", diff)
	}
	if plans, err := e.st.ListPlans(t.Context(), ""); err != nil || len(plans) != 0 {
		t.Errorf("plans stored: %v, %v", plans, err)
	}
	// The first segment alone still fits, by the same re-pack.
	if _, _, err := e.svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: "t", OfferingID: e.offer([2]int{10, 20}), ClientToken: "p2"}); err != nil {
		t.Fatalf("PurchasePlan of the first segment alone: %v", err)
	}
}

// TestPlanEventsAcrossOneJump: a reconcile that takes a segment from
// scheduled to expired at once records every plan transition in between.
func TestPlanEventsAcrossOneJump(t *testing.T) {
	e := newPlanEnv(t)
	v, _, err := e.svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: "t", OfferingID: e.offer([2]int{2, 6}, [2]int{10, 14}), ClientToken: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	e.sim.Advance(8 * time.Hour) // through segment 1, into the gap
	if err := e.svc.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.sim.Advance(8 * time.Hour) // through segment 2
	if err := e.svc.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	events, err := e.st.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type planEvent struct {
		Type string
		At   int
	}
	var got []planEvent
	for _, ev := range events {
		if ev.Subject == v.Plan.ID {
			got = append(got, planEvent{ev.Type, int(ev.Time.Sub(planT0) / time.Hour)})
		}
	}
	want := []planEvent{{"plan.scheduled", 0}, {"plan.active", 2}, {"plan.scheduled", 6}, {"plan.active", 10}, {"plan.expired", 14}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan events (-want +got):\n%s", diff)
	}
	// A cancelled segment fails the plan, with its event.
	v, _, err = e.svc.PurchasePlan(t.Context(), contract.PlanPurchaseRequest{Team: "t", OfferingID: e.offer([2]int{20, 24}, [2]int{30, 34}), ClientToken: "p2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CancelBlock(t.Context(), "t", v.Plan.Segments[1].ID); err != nil {
		t.Fatal(err)
	}
	if p, err := e.svc.GetPlan(t.Context(), "t", v.Plan.ID); err != nil || p.State != core.PlanFailed {
		t.Fatalf("plan after a cancelled segment: %+v, %v", p.State, err)
	}
	events, _ = e.st.Events(t.Context(), "", events[len(events)-1].Seq, 0)
	if last := events[len(events)-1]; last.Type != core.EventPlanFailed || last.Subject != v.Plan.ID {
		t.Errorf("last event %s %s, want plan.failed of %s", last.Type, last.Subject, v.Plan.ID)
	}
	// Another team's plan is not found.
	if _, err := e.svc.GetPlan(t.Context(), "other", v.Plan.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's plan: %v, want not found", err)
	}
}
