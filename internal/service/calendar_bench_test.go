package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store/sqlite"
)

// BenchmarkCalendarsBigFleet measures what the console's calendar routes
// cost on the 10,000-node fleet of BenchmarkPurchaseBigFleet with 20,000
// blocks booked by 50 teams: the fleet calendar (8 weeks hourly) as a
// member of one team sees it, and the price calendar of every start of
// 4 × h100.8x for 24 hours in 8 weeks, each encoded as JSON as the API
// would send it (the API's wire types add no work of their own).
func BenchmarkCalendarsBigFleet(b *testing.B) {
	ctx := context.Background()
	f := bigFleet()
	path := filepath.Join(b.TempDir(), "capblock.db")
	seedBigFleet(b, f, path, 20_000)
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(bigFleetNow), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("route=fleet-calendar/nodes=10000/booked=20000/hours=1344", func(b *testing.B) {
		for b.Loop() {
			pools, err := svc.FleetCalendar(ctx, "team-07", bigFleetNow, 1344)
			if err != nil || len(pools) != 4 {
				b.Fatalf("fleet calendar: %d pools, %v", len(pools), err)
			}
			if err := json.NewEncoder(io.Discard).Encode(pools); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("route=price-calendar/nodes=10000/booked=20000/starts=1320", func(b *testing.B) {
		req := core.SearchRequest{Types: []string{"h100.8x"}, Count: 4, Duration: 24 * time.Hour,
			StartAfter: bigFleetNow, EndBefore: bigFleetNow.Add(8 * 7 * 24 * time.Hour)}
		for b.Loop() {
			starts, err := svc.PriceCalendar(ctx, req)
			if err != nil || len(starts) < 1000 {
				b.Fatalf("price calendar: %d starts, %v", len(starts), err)
			}
			if err := json.NewEncoder(io.Discard).Encode(starts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
