package service

import (
	"context"
	"fmt"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// heldCommits is a store whose commits of new blocks wait until the test
// lets them go, and then fail when told to.
type heldCommits struct {
	store.Full
	entered chan struct{}
	release chan error
}

func (h heldCommits) Commit(ctx context.Context, c store.Change) error {
	if len(c.Insert) == 0 {
		return h.Full.Commit(ctx, c)
	}
	h.entered <- struct{}{}
	if err := <-h.release; err != nil {
		return err
	}
	return h.Full.Commit(ctx, c)
}

// TestSearchesNeverWaitForACommit: while a purchase's commit is under way,
// a search answers at once, and does not offer the capacity the purchase
// holds; a failed commit gives it back, a successful one keeps it.
func TestSearchesNeverWaitForACommit(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	held := heldCommits{entered: make(chan struct{}), release: make(chan error)}
	svc, team := demoService(t, now, func(st store.Full) store.Full { held.Full = st; return held })
	// Every h100.8x of zone-a for one hour: a search for one more finds none.
	search := func(count int) []core.Offering {
		t.Helper()
		offs, err := svc.Offerings(t.Context(), core.SearchRequest{Types: []string{"h100.8x"}, Count: count, Duration: time.Hour,
			StartAfter: now.Add(time.Hour), EndBefore: now.Add(2 * time.Hour), Zone: "zone-a"})
		if err != nil {
			t.Fatal(err)
		}
		return offs
	}
	all := 0
	for _, n := range svc.Fleet().Nodes {
		if n.Zone == "zone-a" && n.GPUModel == "H100" {
			all++
		}
	}
	whole := search(all)
	if len(whole) == 0 {
		t.Fatalf("no offering for all %d h100.8x of zone-a", all)
	}
	buy := func(id, token string) chan error {
		done := make(chan error, 1)
		go func() {
			_, _, err := svc.Purchase(context.Background(), contract.PurchaseRequest{Team: team, OfferingID: id, ClientToken: token})
			done <- err
		}()
		<-held.entered // the commit is under way
		return done
	}

	// 1. A failed commit: searched meanwhile, nothing is offered; after it, all again.
	done := buy(whole[0].ID, "t1")
	answered := make(chan []core.Offering)
	go func() { answered <- search(1) }()
	select {
	case offs := <-answered:
		if len(offs) != 0 {
			t.Fatalf("a search during the commit offered capacity the purchase holds: %+v", offs[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a search waited for a purchase's commit")
	}
	held.release <- fmt.Errorf("disk full")
	if err := <-done; err == nil {
		t.Fatal("the purchase succeeded though its commit failed")
	}
	if offs := search(all); len(offs) == 0 {
		t.Fatal("a failed commit did not give the capacity back")
	}

	// 2. A successful commit keeps it.
	done = buy(search(all)[0].ID, "t2")
	held.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if offs := search(1); len(offs) != 0 {
		t.Fatalf("bought capacity is offered again: %+v", offs[0])
	}
}
