package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// answerLost stores a change and then, once armed, answers an error, as
// a reply lost after the commit was durable would.
type answerLost struct {
	store.Full
	lose bool
}

func (s *answerLost) Commit(ctx context.Context, c store.Change) error {
	if err := s.Full.Commit(ctx, c); err != nil || !s.lose {
		return err
	}
	s.lose = false
	return errors.New("the change is durable, its answer was lost")
}

// TestLostCommitAnswerIsIndexed: a purchase whose commit is durable but
// whose answer is lost is still on the index: its GPUs are not offered
// again, and a retry with its client token answers the block. Before,
// settle forgot the decision, and the index lacked a stored block until
// its next rebuild.
func TestLostCommitAnswerIsIndexed(t *testing.T) {
	ctx := t.Context()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "lost.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := planFleet()
	st := &answerLost{Full: db}
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(planT0), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	search := func() []core.Offering {
		t.Helper()
		offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 3 * time.Hour,
			StartAfter: planHour(2), EndBefore: planHour(5)})
		if err != nil {
			t.Fatal(err)
		}
		return offs
	}
	offs := search()
	if len(offs) == 0 {
		t.Fatal("no offering on an empty fleet")
	}
	st.lose = true
	req := contract.PurchaseRequest{Team: "t", OfferingID: offs[0].ID, ClientToken: "once"}
	if _, _, err := svc.Purchase(ctx, req); err == nil {
		t.Log("the purchase answered its block though its commit's answer was lost")
	}
	stored, err := db.ListBlocks(ctx, store.BlockFilter{Team: "t"})
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored blocks: %d, %v; want the one bought", len(stored), err)
	}
	if got := search(); len(got) != 0 {
		t.Fatalf("both nodes are %s's over its hours, yet a search offers them: %+v", stored[0].ID, got[0])
	}
	b, _, err := svc.Purchase(ctx, req)
	if err != nil || b.ID != stored[0].ID {
		t.Fatalf("the retry with the same client token: %s, %v; want %s", b.ID, err, stored[0].ID)
	}
}
