package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the stored allocations are read back directly
)

// TestNoDoubleBooking fires 64 concurrent purchases of two overlapping
// terms (1 × h100.8x for 48h, the second starting 24h later) at a pool of
// 8 nodes, each buyer with a quote of its own, searched before the race.
// Whatever the order, the overlap day holds 8 instances: exactly 8
// purchases must succeed, and the stored allocations must show no GPU in
// two live blocks at overlapping times.
func TestNoDoubleBooking(t *testing.T) {
	e := start(t)
	s1 := t0.Add(2 * time.Hour)
	s2 := s1.Add(24 * time.Hour)
	const buyers = 64
	a := e.quotes(buyers/2, searchQuery("h100.8x", 1, 48, s1, s1.Add(48*time.Hour)), 48, s1)
	b := e.quotes(buyers/2, searchQuery("h100.8x", 1, 48, s2, s2.Add(48*time.Hour)), 48, s2)

	codes := make([]int, buyers)
	var wg sync.WaitGroup
	race := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			o := a[i/2]
			if i%2 == 1 {
				o = b[i/2]
			}
			<-race
			var p problem
			codes[i] = call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": fmt.Sprintf("buyer-%d", i)}, &p)
			if codes[i] != 201 && p.Code != "no_capacity" {
				t.Errorf("buyer %d: status %d, code %q: %s", i, codes[i], p.Code, p.Detail)
			}
		})
	}
	close(race)
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 201 {
			ok++
		}
	}
	if ok != 8 {
		t.Fatalf("%d purchases succeeded, want exactly 8 (the pool's capacity over the overlap)", ok)
	}
	if n := liveBlocks(t, e.db); n != 8 {
		t.Fatalf("%d live blocks stored, want 8", n)
	}
	assertNoOverlap(t, e.db)
}

// liveBlocks counts the stored live blocks.
func liveBlocks(t *testing.T, db string) int {
	t.Helper()
	conn := openRead(t, db)
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM blocks WHERE state IN ('payment-pending','scheduled','active')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// assertNoOverlap reads the allocation rows of live blocks straight from
// the database and fails when a GPU is in two of them at overlapping times.
func assertNoOverlap(t *testing.T, db string) {
	t.Helper()
	conn := openRead(t, db)
	var rows int
	if err := conn.QueryRow(`SELECT count(*) FROM allocations a JOIN blocks b ON b.id = a.block_id
		WHERE b.state IN ('payment-pending','scheduled','active')`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows == 0 {
		t.Fatal("no allocation rows stored for the live blocks")
	}
	var clashes int
	err := conn.QueryRow(`
		WITH live AS (
			SELECT a.block_id, a.node, a.gpu, a.start_time, a.end_time FROM allocations a
			JOIN blocks b ON b.id = a.block_id
			WHERE b.state IN ('payment-pending','scheduled','active'))
		SELECT count(*) FROM live x JOIN live y
		ON x.node = y.node AND x.gpu = y.gpu AND x.block_id < y.block_id
		AND x.start_time < y.end_time AND y.start_time < x.end_time`).Scan(&clashes)
	if err != nil {
		t.Fatal(err)
	}
	if clashes != 0 {
		t.Fatalf("%d pairs of allocations hold the same GPU at overlapping times", clashes)
	}
}

func openRead(t *testing.T, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestIdempotency: a retry with the same client token returns the same
// block and charges once; the token with other parameters is refused.
func TestIdempotency(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	q := searchQuery("h100.8x", 1, 4, s, s.Add(48*time.Hour))
	o := e.exact(q, 4, s)
	first, code := e.buy(o.OfferingID, "same-token")
	if code != 201 {
		t.Fatalf("first purchase: status %d", code)
	}
	for range 3 {
		again, code := e.buy(o.OfferingID, "same-token")
		if code != 200 || again.ID != first.ID {
			t.Fatalf("retry: status %d, block %s, want 200 and %s", code, again.ID, first.ID)
		}
	}
	var p problem
	other := e.exact(searchQuery("h100.8x", 2, 4, s, s.Add(48*time.Hour)), 4, s)
	code = call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": other.OfferingID, "clientToken": "same-token"}, &p)
	if code != 409 || p.Code != "idempotency_mismatch" {
		t.Fatalf("same token, other offering: status %d, code %q", code, p.Code)
	}
	code = call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": "same-token", "name": "renamed"}, &p)
	if code != 409 || p.Code != "idempotency_mismatch" {
		t.Fatalf("same token, other name: status %d, code %q", code, p.Code)
	}
	ledger, err := e.store.Ledger(context.Background(), e.team)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 || ledger[0].Subject != first.ID || ledger[0].Kind != "charge" {
		t.Fatalf("ledger %+v: want one charge for %s", ledger, first.ID)
	}
	// Price honesty: the charge is the fee quoted.
	if got := ledger[0].Amount.String(); got != o.UpfrontFee.Amount {
		t.Fatalf("charged %s, quoted %s", got, o.UpfrontFee.Amount)
	}
	if n := liveBlocks(t, e.db); n != 1 {
		t.Fatalf("%d blocks stored, want 1", n)
	}
}

// TestOfferingTampered: a changed or expired offering id is refused and
// nothing is stored.
func TestOfferingTampered(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(48*time.Hour)), 4, s)
	tampered := []byte(o.OfferingID)
	tampered[10] ^= 1
	var p problem
	if code := call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": string(tampered), "clientToken": "t1"}, &p); code != 400 || p.Code != "offering_invalid" {
		t.Fatalf("tampered: status %d, code %q", code, p.Code)
	}
	e.advance(11 * time.Minute)
	if code := call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": "t2"}, &p); code != 410 || p.Code != "offering_expired" {
		t.Fatalf("expired: status %d, code %q", code, p.Code)
	}
	if n := liveBlocks(t, e.db); n != 0 {
		t.Fatalf("%d blocks stored after refused purchases", n)
	}
}
