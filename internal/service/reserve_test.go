package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/store/sqlite"
)

// reservingEngine records the steps it takes, as "<kind> <block> <nodes>
// <start>-<end>"; it holds capacity ahead (backend.Reserver) only when
// reserves is set.
type reservingEngine struct {
	*local.Sim
	mu    sync.Mutex
	steps []string
}

func (e *reservingEngine) record(kind string, b core.Block) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.steps = append(e.steps, fmt.Sprintf("%s %s %v %s-%s", kind, b.ID, nodeNames(b.Placements), b.Start.Format("02T15"), b.End.Format("02T15")))
	return nil
}

func (e *reservingEngine) Activate(_ context.Context, b core.Block) error {
	return e.record("activate", b)
}
func (e *reservingEngine) Release(_ context.Context, b core.Block) error {
	return e.record("release", b)
}

func (e *reservingEngine) recorded() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.steps...)
}

// holdingEngine is a reservingEngine that holds capacity ahead.
type holdingEngine struct{ *reservingEngine }

func (e holdingEngine) Reserve(_ context.Context, b core.Block) error { return e.record("reserve", b) }

// TestReserveAhead: on an engine that holds capacity ahead, a purchase
// reserves the block's nodes for its window, an extension before the
// start moves the reservation's end, and a cancellation releases it; on
// one that does not, nothing is reserved.
func TestReserveAhead(t *testing.T) {
	for _, holds := range []bool{true, false} {
		t.Run(fmt.Sprintf("holds ahead %v", holds), func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			f := fleet.Demo()
			rec := &reservingEngine{Sim: local.NewSim(slog.New(slog.DiscardHandler), f.Nodes)}
			var be backend.Backend = rec
			if holds {
				be = holdingEngine{rec}
			}
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			svc, err := New(ctx, Config{Fleet: f, Store: st, Backend: be, Clock: clock.NewSim(now), Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.CreateTeam(ctx, core.Team{ID: "team-a", Name: "a", CreatedAt: now}); err != nil {
				t.Fatal(err)
			}
			runService(t, svc)
			start := now.Add(2 * time.Hour)
			offs, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 4 * time.Hour, StartAfter: start, EndBefore: start.Add(4 * time.Hour)})
			if err != nil || len(offs) == 0 {
				t.Fatalf("searching: %v, %v", offs, err)
			}
			b, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: "team-a", OfferingID: offs[0].ID, ClientToken: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			exts, err := svc.ExtensionOfferings(ctx, "team-a", b.ID, 2*time.Hour)
			if err != nil || len(exts) == 0 {
				t.Fatalf("extension offerings: %v, %v", exts, err)
			}
			x, err := svc.Extend(ctx, "team-a", b.ID, exts[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			ext := x.Block
			if _, err := svc.CancelBlock(ctx, "team-a", b.ID); err != nil {
				t.Fatal(err)
			}
			window := func(b core.Block) string {
				return fmt.Sprintf("%s %v %s-%s", b.ID, nodeNames(b.Placements), b.Start.Format("02T15"), b.End.Format("02T15"))
			}
			want := []string{"release " + window(ext)}
			if holds {
				want = append([]string{"reserve " + window(b), "reserve " + window(ext)}, want...)
			}
			waitFor(t, 10*time.Second, "the engine's steps", func() bool { return len(rec.recorded()) >= len(want) })
			if got := rec.recorded(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the engine's steps:\n got %q\nwant %q", got, want)
			}
		})
	}
}
