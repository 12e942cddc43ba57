package service

import (
	"context"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// heldLoads is a store whose read of the live blocks, once armed, waits
// until released before it answers what it read.
type heldLoads struct {
	store.Full
	armed   chan struct{} // closed: the next read waits
	entered chan struct{}
	release chan struct{}
}

func (h *heldLoads) ListBlocks(ctx context.Context, f store.BlockFilter) ([]core.Block, error) {
	blocks, err := h.Full.ListBlocks(ctx, f)
	select {
	case <-h.armed:
		h.armed = make(chan struct{}) // once
		h.entered <- struct{}{}
		<-h.release
	default:
	}
	return blocks, err
}

// TestRebaseBuildsApart: the daily rebase of the index reads the store
// and builds the new index without the lock: searches and purchases go on
// meanwhile; a purchase made meanwhile makes the rebase build again, and
// the new index holds it.
func TestRebaseBuildsApart(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	held := &heldLoads{armed: make(chan struct{}), entered: make(chan struct{}), release: make(chan struct{})}
	svc, team := demoService(t, now, func(st store.Full) store.Full { held.Full = st; return held })
	sim := svc.clock.(interface {
		Advance(time.Duration) (time.Time, error)
	})
	if _, err := sim.Advance(rebaseAfter + time.Hour); err != nil {
		t.Fatal(err)
	}
	now = svc.clock.Now()
	search := func() []core.Offering {
		t.Helper()
		offs, err := svc.Offerings(t.Context(), core.SearchRequest{Types: []string{"l4.1x"}, Count: 1, Duration: time.Hour,
			StartAfter: now.Add(2 * time.Hour), EndBefore: now.Add(3 * time.Hour)})
		if err != nil || len(offs) == 0 {
			t.Fatalf("searching: %v, %v", offs, err)
		}
		return offs
	}
	offer := search()[0]

	close(held.armed)
	done := make(chan error, 1)
	go func() { done <- svc.Reconcile(context.Background()) }()
	<-held.entered // the rebase reads the store

	// A search and a purchase while it builds.
	answered := make(chan error, 1)
	go func() {
		_, _, err := svc.Purchase(context.Background(), contract.PurchaseRequest{Team: team, OfferingID: offer.ID, ClientToken: "during"})
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("a purchase during the rebase: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a purchase waited for the rebase's read of the store")
	}
	search()
	close(held.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	svc.mu.RLock()
	origin, blocks := svc.index.Origin, len(svc.index.Blocks())
	svc.mu.RUnlock()
	if now.Sub(origin) > time.Hour || blocks != 1 {
		t.Errorf("after the rebase: origin %s (now %s), %d blocks indexed; want origin within the hour, the block bought meanwhile", origin, now, blocks)
	}
}
