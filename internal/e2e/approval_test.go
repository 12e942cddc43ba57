package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestApprovalPolicy: under a policy that blocks of more than 2 instances
// need an admin's approval, such a block waits in payment-pending holding
// its capacity; approved, it is scheduled; unapproved 5 minutes before its
// start, it becomes payment-failed, its charge is reversed and its
// capacity is free again.
func TestApprovalPolicy(t *testing.T) {
	e := startFleet(t, strings.Replace(testFleet, "currency: USD\n", "currency: USD\nlimits: {approvalAboveInstances: 2}\n", 1))
	s := t0.Add(2 * time.Hour)
	q := searchQuery("h100.8x", 4, 4, s, s.Add(4*time.Hour))
	approved, code := e.buy(e.exact(q, 4, s).OfferingID, "big-1")
	if code != 201 || approved.State != "payment-pending" {
		t.Fatalf("a 4-instance block: %d %s", code, approved.State)
	}
	small, _ := e.buy(e.exact(searchQuery("h100.8x", 2, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "small-1")
	if small.State != "scheduled" {
		t.Fatalf("a 2-instance block is %s, want scheduled without approval", small.State)
	}
	e.buy(e.exact(searchQuery("h100.8x", 2, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "small-2")
	// The pool is full: pending blocks hold their capacity.
	if got := e.offerings(q); len(got) != 0 && got[0].StartTime.Equal(s) {
		t.Fatalf("capacity held by a pending block is offered: %+v", got[0])
	}
	var b block
	if code := call(t, e.url, "POST", "/v1/blocks/"+approved.ID+"/approve", nil, &b); code != 200 || b.State != "scheduled" {
		t.Fatalf("approving: %d %s", code, b.State)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/blocks/"+approved.ID+"/approve", nil, &p); code != 409 || p.Code != "invalid_state" {
		t.Fatalf("approving twice: %d %s", code, p.Code)
	}
	// Cancel the approved block and buy a pending one that is never approved.
	call(t, e.url, "POST", "/v1/blocks/"+approved.ID+"/cancel", nil, nil)
	pending, _ := e.buy(e.exact(q, 4, s).OfferingID, "big-2")
	if pending.State != "payment-pending" {
		t.Fatalf("second big block: %s", pending.State)
	}
	e.advance(time.Hour + 55*time.Minute) // 5 minutes before the start
	call(t, e.url, "GET", "/v1/blocks/"+pending.ID, nil, &b)
	if b.State != "payment-failed" {
		t.Fatalf("unapproved 5 minutes before its start: %s", b.State)
	}
	var charged, refunded int64
	ledger, _ := e.store.Ledger(context.Background(), e.team)
	for _, le := range ledger {
		if le.Subject == pending.ID {
			if le.Kind == "charge" {
				charged += le.Amount.Minor
			} else {
				refunded += le.Amount.Minor
			}
		}
	}
	if charged == 0 || refunded != charged {
		t.Fatalf("charged %d, reversed %d", charged, refunded)
	}
	// Its capacity is free again (only the two small blocks hold nodes).
	var avail struct {
		Slots []struct{ Free int } `json:"slots"`
	}
	call(t, e.url, "GET", "/v1/availability?instanceType=h100.8x&from="+ts(s)+"&to="+ts(s.Add(time.Hour)), nil, &avail)
	if len(avail.Slots) != 1 || avail.Slots[0].Free != 4 {
		t.Fatalf("free at the failed block's start: %+v, want 4 of 8", avail.Slots)
	}
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == pending.ID {
			types = append(types, ev.Type)
		}
	}
	if diff := cmp.Diff([]string{"block.purchased", "block.payment-pending", "block.payment-failed"}, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
