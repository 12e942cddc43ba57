package core

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"
	"time"
)

var benchNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// benchIndex builds a fleet of n 8-GPU nodes (H100 and A100, four zones,
// racks of 16) with blocksPerNode whole-node blocks on each node, pairs
// of neighbouring nodes sharing a block, spread over the 26-week horizon.
func benchIndex(b *testing.B, n, blocksPerNode int) *Index {
	b.Helper()
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(), Types: []InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}},
		{Name: "a100.8x", GPUModel: "A100", GPUsPerInstance: 8, OnDemand: Money{Minor: 4096, Currency: "USD"}},
	}}
	for i := range n {
		model := "H100"
		if i%4 == 3 {
			model = "A100"
		}
		f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("n%06d", i), Zone: fmt.Sprintf("zone-%d", i%4),
			Rack: fmt.Sprintf("r%05d", i/64), GPUModel: model, GPUs: 8, Health: Healthy})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	horizon := int(f.Limits.Horizon / time.Hour)
	slot := horizon / max(blocksPerNode, 1)
	var blocks []Block
	// Nodes i and i+4 share zone and model: pair them in one block.
	for base := 0; base+4 < n; base += 8 {
		for off := range 4 {
			a, c := base+off, base+off+4
			for k := range blocksPerNode {
				start := k*slot + rng.IntN(slot/2)
				hours := 24 + rng.IntN(slot/2)
				blocks = append(blocks, Block{ID: fmt.Sprintf("b%d-%d", a, k), State: StateScheduled, Count: 2,
					InstanceType: "h100.8x", Start: benchNow.Add(time.Duration(start) * time.Hour),
					End:        benchNow.Add(time.Duration(start+hours) * time.Hour),
					Placements: []Placement{wholeNode(f.Nodes[a].Name), wholeNode(f.Nodes[c].Name)}})
			}
		}
	}
	ix, err := NewIndex(&f, blocks, benchNow)
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

func wholeNode(name string) Placement {
	return Placement{Node: name, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}
}

// BenchmarkSearch: any start within 8 weeks, 2 × h100.8x for 48 hours,
// all zones, on fleets holding no blocks or about 2 blocks booked per
// node (a block of 2 nodes each: as many blocks as nodes). Its p99 means
// something from 3,000 samples (-benchtime 3000x) on.
func BenchmarkSearch(b *testing.B) {
	for _, c := range []struct{ nodes, perNode int }{{1_000, 2}, {10_000, 2}, {100_000, 0}, {100_000, 2}} {
		b.Run(fmt.Sprintf("nodes=%d/blocks=%d", c.nodes, c.nodes*c.perNode/2), func(b *testing.B) {
			ix := benchIndex(b, c.nodes, c.perNode)
			req := SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 48 * time.Hour,
				StartAfter: benchNow, EndBefore: benchNow.Add(8*7*24*time.Hour + 48*time.Hour)}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				offers, err := ix.Search(req, benchNow)
				lat = append(lat, time.Since(t0))
				if err != nil || len(offers) == 0 {
					b.Fatalf("search: %d offerings, %v", len(offers), err)
				}
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkPlace is the CPU cost of placing one purchase and indexing it,
// with blocks already booked on a 1,000-node fleet.
func BenchmarkPlace(b *testing.B) {
	for _, booked := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("booked=%d", booked), func(b *testing.B) {
			// Pairs of nodes share a block: 2 blocks per node make 1,000 blocks.
			ix := benchIndex(b, 1_000, booked/1_000*2)
			t, _ := ix.Fleet.Type("h100.8x")
			rng := rand.New(rand.NewPCG(9, 9))
			b.ResetTimer()
			for i := range b.N {
				start := benchNow.Add(time.Duration(2+rng.IntN(8*7*24)) * time.Hour)
				req := PlaceRequest{Type: t, Count: 1 + rng.IntN(4), Zone: fmt.Sprintf("zone-%d", rng.IntN(3)), Start: start, End: start.Add(time.Duration(1+rng.IntN(72)) * time.Hour)}
				plan, err := ix.Place(req, benchNow)
				if err != nil {
					continue
				}
				id := fmt.Sprintf("p%d", i)
				_ = ix.Add(Block{ID: id, State: StateScheduled, Count: req.Count, InstanceType: t.Name, Start: req.Start, End: req.End, Placements: plan.Placements})
				ix.Remove(id) // keep the booked count steady
			}
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// BenchmarkNewIndex rebuilds the index of 10,000 nodes from 100,000
// blocks, as a restart does, and reports the heap the index holds.
func BenchmarkNewIndex(b *testing.B) {
	ix := benchIndex(b, 10_000, 20) // pairs of nodes share a block: 100,000 blocks
	blocks := make([]Block, 0, len(ix.blocks))
	for _, bl := range ix.blocks {
		blocks = append(blocks, *bl)
	}
	fleet := ix.Fleet
	ix = nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	var keep *Index
	for range b.N {
		var err error
		if keep, err = NewIndex(fleet, blocks, benchNow); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(len(keep.blocks)), "blocks")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "index-MB")
}
