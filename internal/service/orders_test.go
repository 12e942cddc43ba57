package service

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// orderStart is when the blocks that the order tests compete for start:
// a day after seriesT0, for 8 hours.
var orderStart = seriesT0.Add(24 * time.Hour)

// fillNode buys the whole L4 node for team over the order window.
func (e *seriesEnv) fillNode(team string) core.Block {
	e.t.Helper()
	offers, err := e.svc.Offerings(e.t.Context(), core.SearchRequest{Types: []string{"l4.1x"}, Count: 4, Duration: 8 * time.Hour,
		StartAfter: orderStart, EndBefore: orderStart.Add(8 * time.Hour), Team: team})
	if err != nil || len(offers) == 0 {
		e.t.Fatalf("searching the node: %d offers, %v", len(offers), err)
	}
	b, _, err := e.svc.Purchase(e.t.Context(), contract.PurchaseRequest{Team: team, OfferingID: offers[0].ID, ClientToken: "fill-" + team})
	if err != nil {
		e.t.Fatalf("buying the node: %v", err)
	}
	return b
}

// order places a buy order of team for the whole node over the window.
func (e *seriesEnv) order(team string, mode core.OrderMode, maxFee int64) core.Order {
	e.t.Helper()
	o, err := e.svc.CreateOrder(e.t.Context(), contract.OrderRequest{Team: team, Name: "wait for " + team, Mode: mode,
		InstanceType: "l4.1x", Count: 4, Duration: 8 * time.Hour, StartAfter: orderStart, EndBefore: orderStart.Add(8 * time.Hour),
		MaxFee: core.Money{Minor: maxFee, Currency: "USD"}})
	if err != nil {
		e.t.Fatalf("CreateOrder: %v", err)
	}
	return o
}

func (e *seriesEnv) serve() {
	e.t.Helper()
	if err := e.svc.ServeOrders(e.t.Context()); err != nil {
		e.t.Fatalf("ServeOrders: %v", err)
	}
}

func (e *seriesEnv) orderNow(team, id string) core.Order {
	e.t.Helper()
	o, err := e.svc.GetOrder(e.t.Context(), team, id)
	if err != nil {
		e.t.Fatalf("GetOrder: %v", err)
	}
	return o
}

// eventTypes lists the types of team's events about subject.
func (e *seriesEnv) eventTypes(team, subject string) []string {
	e.t.Helper()
	evs, err := e.st.Events(e.t.Context(), team, 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.Subject == subject {
			out = append(out, ev.Type)
		}
	}
	return out
}

// TestOrderBoughtWhenAnotherTeamCancels: team A fills the node, team B's
// buy order waits, A cancels, and B's order buys the block through the
// purchase path, recorded on the order with its events.
func TestOrderBoughtWhenAnotherTeamCancels(t *testing.T) {
	e := newSeriesEnv(t)
	a := e.fillNode("team-a")
	o := e.order("team-b", core.OrderBuy, 1_000_000)
	e.serve()
	if got := e.orderNow("team-b", o.ID); got.State != core.OrderOpen || !strings.Contains(got.Reason, "no capacity") {
		t.Fatalf("order while the node is full: %s, %q", got.State, got.Reason)
	}
	if _, err := e.svc.CancelBlock(t.Context(), "team-a", a.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.svc.ordersKick: // the cancel woke the leader's pass
	default:
		t.Errorf("cancelling a block did not wake the standing orders")
	}
	e.serve()
	got := e.orderNow("team-b", o.ID)
	if got.State != core.OrderBought || got.BlockID == "" {
		t.Fatalf("order after the cancel: %s, block %q, reason %q", got.State, got.BlockID, got.Reason)
	}
	b, err := e.svc.GetBlock(t.Context(), "team-b", got.BlockID)
	if err != nil || !b.Start.Equal(orderStart) || b.Count != 4 || b.State != core.StateScheduled {
		t.Fatalf("the order's block: %+v, %v", b, err)
	}
	// The purchase went through the purchase path: charged, with the
	// order's client token.
	rec, err := e.st.Idempotency(t.Context(), "team-b", "order-"+o.ID)
	if err != nil || rec.Subject != b.ID {
		t.Errorf("idempotency record: %+v, %v", rec, err)
	}
	if diff := cmp.Diff([]string{core.EventOrderCreated, core.EventOrderBought}, e.eventTypes("team-b", o.ID)); diff != "" {
		t.Errorf("order events (-want +got):\n%s", diff)
	}
	// Team A cannot see it.
	if _, err := e.svc.GetOrder(t.Context(), "team-a", o.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's GetOrder: %v", err)
	}
	if _, err := e.svc.CancelOrder(t.Context(), "team-a", o.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another team's CancelOrder: %v", err)
	}
	// A bought order cannot be cancelled.
	if _, err := e.svc.CancelOrder(t.Context(), "team-b", o.ID); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("cancelling a bought order: %v", err)
	}
}

// TestOrderAboveMaxFeeIsNotBought: the capacity is free, but the block
// costs more than the order's maxFee: it waits, saying so.
func TestOrderAboveMaxFeeIsNotBought(t *testing.T) {
	e := newSeriesEnv(t)
	o := e.order("team-b", core.OrderBuy, 1)
	e.serve()
	got := e.orderNow("team-b", o.ID)
	if got.State != core.OrderOpen || got.BlockID != "" || !strings.Contains(got.Reason, "above maxFee 0.01 USD") {
		t.Fatalf("order: %s, block %q, reason %q", got.State, got.BlockID, got.Reason)
	}
	if blocks, _ := e.svc.ListBlocks(t.Context(), "team-b", ""); len(blocks) != 0 {
		t.Errorf("team-b holds %d blocks, want none", len(blocks))
	}
}

// TestOrdersFirstComeFirstServed: two orders wait for the same capacity;
// when it frees, the older one buys it and the younger keeps waiting.
func TestOrdersFirstComeFirstServed(t *testing.T) {
	e := newSeriesEnv(t)
	a := e.fillNode("team-a")
	first := e.order("team-c", core.OrderBuy, 1_000_000)
	e.sim.Advance(time.Second)
	second := e.order("team-b", core.OrderBuy, 1_000_000)
	if _, err := e.svc.CancelBlock(t.Context(), "team-a", a.ID); err != nil {
		t.Fatal(err)
	}
	e.serve()
	if got := e.orderNow("team-c", first.ID); got.State != core.OrderBought {
		t.Errorf("the first order: %s (%q), want bought", got.State, got.Reason)
	}
	if got := e.orderNow("team-b", second.ID); got.State != core.OrderOpen {
		t.Errorf("the second order: %s, want open", got.State)
	}
}

// TestOrderNotifyAndExpire: a notify order records order.fits once it
// fits; one that never fits expires at its deadline.
func TestOrderNotifyAndExpire(t *testing.T) {
	e := newSeriesEnv(t)
	e.fillNode("team-a")
	waits := e.order("team-b", core.OrderNotify, 0)
	if !waits.Deadline.Equal(orderStart) {
		t.Errorf("deadline %s, want the latest start %s", waits.Deadline, orderStart)
	}
	e.serve()
	e.sim.Set(orderStart)
	e.serve()
	if got := e.orderNow("team-b", waits.ID); got.State != core.OrderExpired {
		t.Fatalf("order past its deadline: %s", got.State)
	}
	if diff := cmp.Diff([]string{core.EventOrderCreated, core.EventOrderExpired}, e.eventTypes("team-b", waits.ID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	later := orderStart.Add(24 * time.Hour)
	n, err := e.svc.CreateOrder(t.Context(), contract.OrderRequest{Team: "team-b", Mode: core.OrderNotify, InstanceType: "l4.1x",
		Count: 2, Duration: 4 * time.Hour, StartAfter: later, EndBefore: later.Add(8 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	e.serve()
	if got := e.orderNow("team-b", n.ID); got.State != core.OrderNotified {
		t.Fatalf("notify order that fits: %s (%q)", got.State, got.Reason)
	}
	if diff := cmp.Diff([]string{core.EventOrderCreated, core.EventOrderFits}, e.eventTypes("team-b", n.ID)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestOrderBadInput(t *testing.T) {
	e := newSeriesEnv(t)
	good := contract.OrderRequest{Team: "team-b", Mode: core.OrderBuy, InstanceType: "l4.1x", Count: 4, Duration: 8 * time.Hour,
		StartAfter: orderStart, EndBefore: orderStart.Add(8 * time.Hour), MaxFee: core.Money{Minor: 100, Currency: "USD"}}
	for name, mod := range map[string]func(*contract.OrderRequest){
		"mode":     func(r *contract.OrderRequest) { r.Mode = "maybe" },
		"no fee":   func(r *contract.OrderRequest) { r.MaxFee = core.Money{} },
		"currency": func(r *contract.OrderRequest) { r.MaxFee.Currency = "EUR" },
		"type":     func(r *contract.OrderRequest) { r.InstanceType = "b200.8x" },
		"count":    func(r *contract.OrderRequest) { r.Count = 1000 },
		"window":   func(r *contract.OrderRequest) { r.EndBefore = orderStart.Add(4 * time.Hour) },
		"past": func(r *contract.OrderRequest) {
			r.StartAfter, r.EndBefore = seriesT0.Add(-9*time.Hour), seriesT0.Add(-time.Hour)
		},
		"zone": func(r *contract.OrderRequest) { r.Zone = "nowhere" },
	} {
		req := good
		mod(&req)
		if _, err := e.svc.CreateOrder(t.Context(), req); !errors.Is(err, core.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	if orders, _ := e.svc.ListOrders(t.Context(), ""); len(orders) != 0 {
		t.Errorf("bad input stored %d orders", len(orders))
	}
}

// TestOpenOrdersAreBounded: a team may hold maxOpenOrders open orders;
// one more is refused, and a cancelled one makes room.
func TestOpenOrdersAreBounded(t *testing.T) {
	e := newSeriesEnv(t)
	var first core.Order
	for i := range maxOpenOrders {
		o := e.order("team-b", core.OrderNotify, 0)
		if i == 0 {
			first = o
		}
	}
	req := contract.OrderRequest{Team: "team-b", InstanceType: "l4.1x", Count: 1, Duration: time.Hour,
		StartAfter: orderStart, EndBefore: orderStart.Add(8 * time.Hour)}
	if _, err := e.svc.CreateOrder(t.Context(), req); !errors.Is(err, core.ErrQuotaExceeded) {
		t.Fatalf("order %d: %v, want quota exceeded", maxOpenOrders+1, err)
	}
	if _, err := e.svc.CreateOrder(t.Context(), contract.OrderRequest{Team: "team-c", InstanceType: "l4.1x", Count: 1,
		Duration: time.Hour, StartAfter: orderStart, EndBefore: orderStart.Add(8 * time.Hour)}); err != nil {
		t.Fatalf("another team's order: %v", err)
	}
	if _, err := e.svc.CancelOrder(t.Context(), "team-b", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateOrder(t.Context(), req); err != nil {
		t.Fatalf("an order after a cancel: %v", err)
	}
}

// TestOrderBoughtWhenNodeRecovers: with the only node failed nothing
// fits; its recovery wakes the standing orders, and the order buys.
func TestOrderBoughtWhenNodeRecovers(t *testing.T) {
	e := newSeriesEnv(t)
	if _, err := e.svc.FailNode(t.Context(), "l4-0", "maintenance"); err != nil {
		t.Fatal(err)
	}
	o := e.order("team-b", core.OrderBuy, 1_000_000)
	e.serve()
	if got := e.orderNow("team-b", o.ID); got.State != core.OrderOpen {
		t.Fatalf("order with the node failed: %s", got.State)
	}
	select {
	case <-e.svc.ordersKick: // drain the order's own kick
	default:
	}
	if _, err := e.svc.RecoverNode(t.Context(), "l4-0"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.svc.ordersKick:
	default:
		t.Errorf("a node's recovery did not wake the standing orders")
	}
	e.serve()
	if got := e.orderNow("team-b", o.ID); got.State != core.OrderBought {
		t.Errorf("order after the recovery: %s (%q)", got.State, got.Reason)
	}
}
