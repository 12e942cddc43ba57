package service

import (
	"context"
	"sync"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// laggingWatch is a PostgreSQL store whose watch holds back what it
// delivers while held, as a replica's connection that is slow to read
// its notifications does, then delivers it all in order.
type laggingWatch struct {
	*postgres.Store
	mu     sync.Mutex
	held   bool
	queued []store.Notice
	out    chan store.Notice
}

func (l *laggingWatch) WatchBlocks(ctx context.Context) <-chan store.Notice {
	in := l.Store.WatchBlocks(ctx)
	l.out = make(chan store.Notice)
	go func() {
		defer close(l.out)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var (
				next store.Notice
				send chan store.Notice
			)
			l.mu.Lock()
			if !l.held && len(l.queued) > 0 {
				next, send = l.queued[0], l.out
			}
			l.mu.Unlock()
			select {
			case n, ok := <-in:
				if !ok {
					return
				}
				l.mu.Lock()
				l.queued = append(l.queued, n)
				l.mu.Unlock()
			case send <- next:
				l.mu.Lock()
				l.queued = l.queued[1:]
				l.mu.Unlock()
			case <-tick.C: // the hold may have ended
			case <-ctx.Done():
				return
			}
		}
	}()
	return l.out
}

func (l *laggingWatch) hold(on bool) {
	l.mu.Lock()
	l.held = on
	l.mu.Unlock()
}

// TestRefusalCatchesUp: a replica whose watch is behind refuses a
// purchase for no capacity only once it has caught up with the commits
// that ended before it was asked. Before, a replica that had not yet
// heard of another's cancel refused the hours the cancel had freed: a
// refusal that no order of the acknowledged operations explains.
func TestRefusalCatchesUp(t *testing.T) {
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.Start(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lw := &laggingWatch{Store: st}
	svc := newHealthService(t, lw, healthT0)
	runService(t, svc)
	waitFor(t, 20*time.Second, "the replica's watch to listen", func() bool { return watchListened(t, svc) })
	if err := st.CreateTeam(ctx, core.Team{ID: "t", Name: "t", CreatedAt: healthT0}); err != nil {
		t.Fatal(err)
	}
	// 1. A quote for one whole node, while the fleet is free.
	offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 8 * time.Hour,
		StartAfter: healthT0.Add(2 * time.Hour), EndBefore: healthT0.Add(10 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("searching an empty fleet: %v, %v", offs, err)
	}
	// 2. Another replica fills the fleet; this one hears of it.
	var full []core.Block
	for _, n := range []string{"n0", "n1", "n2"} {
		full = append(full, healthBlock("cb-"+n, "h100.8x", n, 0, 1, 2, 3, 4, 5, 6, 7))
	}
	if err := st.Commit(ctx, store.Change{Insert: full}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the replica to hear of the full fleet", func() bool { return freeWholeNodes(t, svc) == 0 })
	// 3. Its watch falls behind; the other replica cancels a block.
	lw.hold(true)
	cancelled := full[0]
	cancelled.State = core.StateCancelled
	if err := st.Commit(ctx, store.Change{Update: []store.BlockUpdate{{Block: cancelled, ExpectedVersion: 1}}}); err != nil {
		t.Fatal(err)
	}
	// 4. The quote is bought on this replica: the node is free.
	b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: "t", OfferingID: offs[0].ID, ClientToken: "after-the-cancel"})
	lw.hold(false)
	if err != nil {
		t.Fatalf("buying the node that another replica's cancel freed before the purchase began: %v", err)
	}
	if len(b.Placements) != 1 || b.Placements[0].Node != "n0" {
		t.Errorf("the purchase took %v; the free node is n0", b.Placements)
	}
}
