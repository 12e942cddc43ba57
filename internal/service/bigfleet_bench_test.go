package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// bigFleetNow is the simulated time of the big-fleet benchmarks.
var bigFleetNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkPurchaseBigFleet measures the whole purchase (service and
// SQLite, durable, without HTTP) as the booked blocks grow: one h100.8x
// (a whole node) on a fleet of 10,000 nodes (4 zones × 50 racks × 50
// nodes of 8 H100) with 0, 10,000 and 100,000 blocks booked, and one
// l4.1x (one GPU) on the demo fleet with nothing booked, the cost that
// a whole node on the big fleet should stay within twice of.
//
// Booked blocks are one whole node each, 1 to 48 hours at random starts
// within 8 weeks (seeded), committed straight to the store in big
// changes once per run into a template file; each measurement starts a
// service over a copy of it, so its start loads them into the index, as
// a restart does. The purchases are 1 to 48 hours too, at random starts
// within 8 weeks; their quotes are searched before the timer starts.
func BenchmarkPurchaseBigFleet(b *testing.B) {
	big := bigFleet()
	templates := map[int]string{}
	dir := b.TempDir()
	for _, booked := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("type=h100.8x/nodes=10000/booked=%d", booked), func(b *testing.B) {
			tmpl, ok := templates[booked]
			if !ok {
				tmpl = filepath.Join(dir, fmt.Sprintf("booked-%d.db", booked))
				seedBigFleet(b, big, tmpl, booked)
				templates[booked] = tmpl
			}
			path := filepath.Join(b.TempDir(), "capblock.db")
			copyFile(b, tmpl, path)
			benchPurchases(b, big, path, "h100.8x")
		})
	}
	b.Run("type=l4.1x/fleet=demo/booked=0", func(b *testing.B) {
		benchPurchases(b, fleet.Demo(), filepath.Join(b.TempDir(), "capblock.db"), "l4.1x")
	})
}

// bigFleet is 4 zones × 50 racks × 50 nodes of 8 H100, sold whole.
func bigFleet() core.Fleet {
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	for z := range 4 {
		for r := range 50 {
			for n := range 50 {
				f.Nodes = append(f.Nodes, core.Node{
					Name: fmt.Sprintf("z%d-r%02d-n%02d", z, r, n), Zone: fmt.Sprintf("zone-%d", z),
					Rack: fmt.Sprintf("z%d-r%02d", z, r), GPUModel: "H100", GPUs: 8, Health: core.Healthy})
			}
		}
	}
	return f
}

// seedBigFleet writes booked whole-node blocks of f into a new SQLite
// file at path, 2,000 to a change. Each goes to a random node free for
// its window (nodes are drawn again until one is).
func seedBigFleet(b testing.TB, f core.Fleet, path string, booked int) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rng := rand.New(rand.NewPCG(11, uint64(booked)))
	type span struct{ start, end int }
	taken := make([][]span, len(f.Nodes))
	free := func(n int, s span) bool {
		for _, t := range taken[n] {
			if t.start < s.end && s.start < t.end {
				return false
			}
		}
		return true
	}
	fee := core.Money{Minor: 9832, Currency: "USD"}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	var c store.Change
	for i := range booked {
		h := 1 + rng.IntN(48)
		s := span{start: 1 + rng.IntN(8*7*24-h), end: 0}
		s.end = s.start + h
		n := rng.IntN(len(f.Nodes))
		for !free(n, s) {
			n = rng.IntN(len(f.Nodes))
		}
		taken[n] = append(taken[n], s)
		node := f.Nodes[n]
		c.Insert = append(c.Insert, core.Block{
			ID: fmt.Sprintf("cb-seed-%06d", i), Name: "seed", Team: fmt.Sprintf("team-%02d", i%50),
			InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: node.Zone,
			Start: bigFleetNow.Add(time.Duration(s.start) * time.Hour), End: bigFleetNow.Add(time.Duration(s.end) * time.Hour),
			State: core.StateScheduled, Fee: core.Money{Minor: fee.Minor * int64(h), Currency: "USD"},
			CreatedAt:  bigFleetNow.Add(-time.Hour),
			Placements: []core.Placement{{Node: node.Name, GPUs: all}},
		})
		if len(c.Insert) == 2000 || i == booked-1 {
			if err := st.Commit(ctx, c); err != nil {
				b.Fatalf("seeding blocks: %v", err)
			}
			c = store.Change{}
		}
	}
}

// benchPurchases buys b.N instances of typ, one after another, through a
// service on f over the SQLite file at path, and reports purchases per
// second, the process's CPU time per purchase, and how long the
// service took to start (loading the booked blocks and indexing them).
func benchPurchases(b *testing.B, f core.Fleet, path, typ string) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	started := time.Now()
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clock.NewSim(bigFleetNow), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	startTime := time.Since(started)
	rng := rand.New(rand.NewPCG(13, 13))
	offers := make([]string, b.N)
	for i := range offers {
		h := time.Duration(1+rng.IntN(48)) * time.Hour
		s := bigFleetNow.Add(time.Duration(1+rng.IntN(8*7*24-48)) * time.Hour)
		found, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{typ}, Count: 1, Duration: h,
			StartAfter: s, EndBefore: s.Add(h), MaxResults: 1})
		if err != nil || len(found) == 0 {
			b.Fatalf("offering of %s at %s for %s: %d offerings, %v", typ, s, h, len(found), err)
		}
		offers[i] = found[0].ID
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := svc.Purchase(ctx, contract.PurchaseRequest{Team: "t", OfferingID: offers[i], ClientToken: fmt.Sprintf("tok-%d", i)}); err != nil {
			b.Fatalf("purchase %d: %v", i, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(startTime.Milliseconds()), "start-ms")
}

// processCPU is the user and system time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copyFile copies the SQLite file from to the new file to.
func copyFile(b testing.TB, from, to string) {
	b.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		b.Fatal(err)
	}
}
