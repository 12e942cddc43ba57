package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestLifecycle watches a block live its whole life on the simulated
// clock: scheduled → active → warning → terminating → expired.
func TestLifecycle(t *testing.T) {
	e := start(t)
	start := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 2, 4, start, start.Add(24*time.Hour)), 4, start)
	b, code := e.buy(o.OfferingID, "life-1")
	if code != 201 || b.State != "scheduled" {
		t.Fatalf("buy: status %d, state %q", code, b.State)
	}
	steps := []struct {
		advance time.Duration
		state   string
	}{
		{2 * time.Hour, "active"},                // start
		{3*time.Hour + 20*time.Minute, "active"}, // end − 40 min: warning
		{10 * time.Minute, "active"},             // end − 30 min: terminating
		{30 * time.Minute, "expired"},            // end
	}
	for _, s := range steps {
		e.advance(s.advance)
		var got block
		call(t, e.url, "GET", "/v1/blocks/"+b.ID, nil, &got)
		if got.State != s.state {
			t.Fatalf("after +%s: state %q, want %q", s.advance, got.State, s.state)
		}
	}
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == b.ID {
			types = append(types, ev.Type)
		}
	}
	want := []string{"block.purchased", "block.scheduled", "block.active", "block.expiration-warning", "block.terminating", "block.expired"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("events of %s (-want +got):\n%s", b.ID, diff)
	}
}

// TestLifecycleOneJump moves the clock past the whole block at once: the
// events still come in the order they were due.
func TestLifecycleOneJump(t *testing.T) {
	e := start(t)
	start := t0.Add(3 * time.Hour)
	o := e.exact(searchQuery("l4.1x", 3, 2, start, start.Add(24*time.Hour)), 2, start)
	b, _ := e.buy(o.OfferingID, "jump-1")
	e.advance(24 * time.Hour)
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == b.ID {
			types = append(types, ev.Type)
		}
	}
	want := []string{"block.purchased", "block.scheduled", "block.active", "block.expiration-warning", "block.terminating", "block.expired"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestCancel: a full refund before the start, the capacity free again,
// and no refund for an early release after the start.
func TestCancel(t *testing.T) {
	e := start(t)
	start := t0.Add(2 * time.Hour)
	q := searchQuery("h100.8x", 8, 4, start, start.Add(4*time.Hour))
	o := e.exact(q, 4, start)
	b, _ := e.buy(o.OfferingID, "c-1")
	if got := e.offerings(q); len(got) != 0 {
		t.Fatalf("the fleet is full, yet %d offerings", len(got))
	}
	var c block
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/cancel", nil, &c); code != 200 || c.State != "cancelled" {
		t.Fatalf("cancel: status %d, state %q", code, c.State)
	}
	if got := e.offerings(q); len(got) == 0 {
		t.Fatal("the cancelled block's capacity is not offered again")
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/cancel", nil, &p); code != 409 || p.Code != "invalid_state" {
		t.Fatalf("second cancel: status %d, code %q", code, p.Code)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	var charged, refunded int64
	for _, le := range ledger {
		if le.Subject != b.ID {
			continue
		}
		if le.Kind == "charge" {
			charged += le.Amount.Minor
		} else {
			refunded += le.Amount.Minor
		}
	}
	if charged == 0 || refunded != charged {
		t.Fatalf("charged %d, refunded %d: want a full refund before the start", charged, refunded)
	}

	// After the start: released early, no refund under the default policy.
	o2 := e.exact(searchQuery("h100.8x", 1, 4, start, start.Add(8*time.Hour)), 4, start)
	b2, _ := e.buy(o2.OfferingID, "c-2")
	e.advance(3 * time.Hour)
	call(t, e.url, "POST", "/v1/blocks/"+b2.ID+"/cancel", nil, &c)
	if c.State != "cancelled" {
		t.Fatalf("early release: state %q", c.State)
	}
	ledger, _ = e.store.Ledger(context.Background(), e.team)
	for _, le := range ledger {
		if le.Subject == b2.ID && le.Kind == "refund" {
			t.Fatalf("refund %v after the start; the default policy refunds nothing", le.Amount)
		}
	}
}

// TestExtend: the same id, a later end, the extension fee charged; an
// extension quote extends once (bought again, it answers the block as
// extended), a quote for the old end no longer fits,
// and extensions are refused once the end is less than an hour away.
func TestExtend(t *testing.T) {
	e := start(t)
	start := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 2, 4, start, start.Add(24*time.Hour)), 4, start)
	b, _ := e.buy(o.OfferingID, "x-1")
	extension := func() offering {
		t.Helper()
		var ext struct {
			Offerings []offering `json:"offerings"`
		}
		if code := call(t, e.url, "GET", "/v1/blocks/"+b.ID+"/extension-offerings?durationHours=6", nil, &ext); code != 200 || len(ext.Offerings) != 1 {
			t.Fatalf("extension offerings: status %d, %d offerings", code, len(ext.Offerings))
		}
		return ext.Offerings[0]
	}
	x, stale := extension(), extension()
	if x.OfferingID[:4] != "cbe-" || !x.StartTime.Equal(b.EndTime) || !x.EndTime.Equal(b.EndTime.Add(6*time.Hour)) {
		t.Fatalf("extension offering %+v", x)
	}
	if stale.OfferingID == x.OfferingID {
		t.Fatalf("two searches gave one extension quote %s", x.OfferingID)
	}
	var got block
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": x.OfferingID}, &got); code != 200 {
		t.Fatalf("extend: status %d", code)
	}
	if got.ID != b.ID || !got.EndTime.Equal(b.EndTime.Add(6*time.Hour)) {
		t.Fatalf("extended block %+v, want id %s ending %s", got, b.ID, b.EndTime.Add(6*time.Hour))
	}
	// Buying the same extension again: the block as extended, once.
	var again block
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": x.OfferingID}, &again); code != 200 || !again.EndTime.Equal(got.EndTime) {
		t.Fatalf("second extension with the same offering: status %d, block %+v; want 200 and the block ending %s", code, again, got.EndTime)
	}
	var p problem
	// Another quote for the same terms, unused: the block no longer ends
	// where it starts.
	if code := call(t, e.url, "POST", "/v1/blocks/"+b.ID+"/extensions", map[string]any{"offeringId": stale.OfferingID}, &p); code != 409 || p.Code != "invalid_state" {
		t.Fatalf("extension quoted for the old end: status %d, code %q", code, p.Code)
	}
	// Within an hour of the end extensions are closed.
	e.advance(2*time.Hour + 9*time.Hour + 30*time.Minute) // 30 min before the new end
	if code := call(t, e.url, "GET", "/v1/blocks/"+b.ID+"/extension-offerings?durationHours=1", nil, &p); code != 409 || p.Code != "invalid_state" {
		t.Fatalf("late extension: status %d, code %q (%s)", code, p.Code, p.Detail)
	}
}
