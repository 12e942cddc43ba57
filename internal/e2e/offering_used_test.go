package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOfferingBuysOnce: a quote buys one block. Under another client
// token it is refused with offering_used, even when the first purchase
// took every instance it quoted (no_capacity would hide why); under the
// first token it still answers with the first block, charged once.
func TestOfferingBuysOnce(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	for _, count := range []int{1, 8} { // 8: the whole H100 pool
		o := e.exact(searchQuery("h100.8x", count, 4, s, s.Add(4*time.Hour)), 4, s)
		first, code := e.buy(o.OfferingID, fmt.Sprintf("first-%d", count))
		if code != 201 {
			t.Fatalf("%d instances: first purchase: status %d", count, code)
		}
		var p problem
		code = call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": fmt.Sprintf("second-%d", count)}, &p)
		if code != 409 || p.Code != "offering_used" || !strings.Contains(p.Detail, "clientToken") {
			t.Fatalf("%d instances: same offering, another token: status %d, code %q (%s); want 409 offering_used", count, code, p.Code, p.Detail)
		}
		again, code := e.buy(o.OfferingID, fmt.Sprintf("first-%d", count))
		if code != 200 || again.ID != first.ID {
			t.Fatalf("%d instances: first token again: status %d, block %s; want 200 and %s", count, code, again.ID, first.ID)
		}
		s = s.Add(4 * time.Hour)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 2 {
		t.Fatalf("ledger %+v: want one charge per block bought", ledger)
	}
	if n := liveBlocks(t, e.db); n != 2 {
		t.Fatalf("%d blocks stored, want 2", n)
	}
}

// TestOfferingBoughtConcurrently: 16 buyers race for one quote, each with
// its own client token. Exactly one gets the block; every other is told
// offering_used, and one charge is stored.
func TestOfferingBoughtConcurrently(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s)
	const buyers = 16
	var (
		wg     sync.WaitGroup
		codes  [buyers]int
		probs  [buyers]problem
		starts = make(chan struct{})
	)
	for i := range buyers {
		wg.Go(func() {
			<-starts
			codes[i] = call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": fmt.Sprintf("racer-%d", i)}, &probs[i])
		})
	}
	close(starts)
	wg.Wait()
	won := 0
	for i := range buyers {
		switch {
		case codes[i] == 201:
			won++
		case codes[i] != 409 || probs[i].Code != "offering_used":
			t.Errorf("buyer %d: status %d, code %q (%s); want 201 or 409 offering_used", i, codes[i], probs[i].Code, probs[i].Detail)
		}
	}
	if won != 1 {
		t.Fatalf("%d purchases of one offering succeeded, want exactly 1", won)
	}
	if n := liveBlocks(t, e.db); n != 1 {
		t.Fatalf("%d blocks stored, want 1", n)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 {
		t.Fatalf("ledger %+v: want one charge", ledger)
	}
}

// TestPlanOfferingBuysOnce: a plan quote buys one plan, as a block quote
// buys one block.
func TestPlanOfferingBuysOnce(t *testing.T) {
	e := start(t)
	offers := e.planOfferings(planQuery("h100.8x", 2, 8, 1, t0.Add(2*time.Hour), t0.Add(24*time.Hour)))
	if len(offers) == 0 {
		t.Fatal("no plan offering")
	}
	id := offers[0].OfferingID
	var first plan
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": id, "name": "llama", "clientToken": "plan-1"}, &first); code != 201 {
		t.Fatalf("buying the plan: status %d", code)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": id, "name": "llama", "clientToken": "plan-2"}, &p); code != 409 || p.Code != "offering_used" {
		t.Fatalf("same plan offering, another token: status %d, code %q (%s); want 409 offering_used", code, p.Code, p.Detail)
	}
	var again plan
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": id, "name": "llama", "clientToken": "plan-1"}, &again); code != 200 || again.ID != first.ID {
		t.Fatalf("first token again: status %d, plan %s; want 200 and %s", code, again.ID, first.ID)
	}
}

// TestExtensionOfferingExtendsOnce: an extension offering extends its
// block once; bought again (a retry whose answer was lost) it answers the
// block as extended, charged once; another team is told the block does
// not exist, and the offering on another block is refused.
func TestExtensionOfferingExtendsOnce(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	b, code := e.buy(e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "x-1")
	if code != 201 {
		t.Fatalf("buying the block: status %d", code)
	}
	other, code := e.buy(e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "x-2")
	if code != 201 {
		t.Fatalf("buying the other block: status %d", code)
	}
	var ext struct{ Offerings []offering }
	if code := call(t, e.url, "GET", "/v1/blocks/"+b.ID+"/extension-offerings?durationHours=2", nil, &ext); code != 200 || len(ext.Offerings) != 1 {
		t.Fatalf("extension offerings: status %d, %d offerings", code, len(ext.Offerings))
	}
	x := ext.Offerings[0].OfferingID
	var first, again block
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": x}, &first); code != 200 {
		t.Fatalf("extending: status %d", code)
	}
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": x}, &again); code != 200 {
		t.Fatalf("the same extension offering again: status %d; want 200", code)
	}
	if diff := cmp.Diff(first, again); diff != "" || !first.EndTime.Equal(b.EndTime.Add(2*time.Hour)) {
		t.Fatalf("the same extension offering again (-first +again):\n%s\nfirst ends at %s, want %s", diff, first.EndTime, b.EndTime.Add(2*time.Hour))
	}
	var p problem
	stranger := newTenant(t, e.url, "strangers")
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": x}, &p, stranger.token); code != 404 || p.Code != "not_found" {
		t.Fatalf("another team buying the offering: status %d, code %q (%s); want 404 not_found", code, p.Code, p.Detail)
	}
	if code := call(t, e.url, "POST", "/v1/blocks/"+other.ID+"/extensions", map[string]any{"offeringId": x}, &p); code != 400 || p.Code != "offering_invalid" {
		t.Fatalf("the offering on another block: status %d, code %q (%s); want 400 offering_invalid", code, p.Code, p.Detail)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 3 {
		t.Fatalf("ledger %+v: want the blocks' charges and one extension's", ledger)
	}
}
