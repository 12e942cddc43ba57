package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// demoService is a service on the demo fleet, a fresh SQLite file seen
// through wrap and a simulated clock at now, with a team "team-a" whose
// id it returns.
func demoService(t *testing.T, now time.Time, wrap func(store.Full) store.Full) (*Service, string) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(t.Context(), Config{Fleet: fleet.Demo(), Store: wrap(st), Clock: clock.NewSim(now), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTeam(t.Context(), core.Team{ID: "team-a", Name: "a", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	return svc, "team-a"
}

// conflicting is a store whose commits of blocks always conflict, the
// way they do when another team's block holds the GPUs.
type conflicting struct {
	store.Full
}

func (c conflicting) Commit(ctx context.Context, ch store.Change) error {
	if len(ch.Insert) > 0 || len(ch.Update) > 0 {
		return fmt.Errorf("block cb-new: GPU 0 of node a-l4-1 is taken by block cb-theirs: %w", store.ErrConflict)
	}
	return c.Full.Commit(ctx, ch)
}

// TestConflictNamesNoOtherBlock: a purchase that keeps conflicting ends
// in a conflict that names none of the blocks that stood in its way (they
// may be another team's).
func TestConflictNamesNoOtherBlock(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	svc, team := demoService(t, now, func(st store.Full) store.Full { return conflicting{st} })
	offs, err := svc.Offerings(t.Context(), core.SearchRequest{Types: []string{"l4.1x"}, Count: 1, Duration: time.Hour,
		StartAfter: now.Add(time.Hour), EndBefore: now.Add(3 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("searching: %v %v", offs, err)
	}
	_, _, err = svc.Purchase(t.Context(), contract.PurchaseRequest{Team: team, OfferingID: offs[0].ID, ClientToken: "t1"})
	if !errors.Is(err, core.ErrConflict) || strings.Contains(err.Error(), "cb-theirs") || strings.Contains(err.Error(), "a-l4-1") {
		t.Fatalf("purchase that keeps conflicting: %v; want a conflict naming no other block or node", err)
	}
}
