package core

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// bigFleet is 4 zones × 50 racks × 50 nodes of 8 H100, sold whole: four
// pools of 2,500 nodes.
func bigFleet() Fleet {
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(), Types: []InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}},
	}}
	for z := range 4 {
		for r := range 50 {
			for n := range 50 {
				f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("z%d-r%02d-n%02d", z, r, n), Zone: fmt.Sprintf("zone-%d", z),
					Rack: fmt.Sprintf("r%02d", r), GPUModel: "H100", GPUs: 8, Health: Healthy})
			}
		}
	}
	return f
}

// bigFleetBlocks books n blocks of one whole node for 1–48 hours at
// random starts over 8 weeks, each on a random node of a random zone
// that is free for its window (found by trying nodes, not by Place, so
// that the booked state is the same whatever Place does).
func bigFleetBlocks(f Fleet, n int, rng *rand.Rand) []Block {
	type span struct{ s, e int }
	busy := make([][]span, len(f.Nodes))
	perZone := len(f.Nodes) / 4
	var out []Block
	for len(out) < n {
		start, hours := 2+rng.IntN(8*7*24), 1+rng.IntN(48)
		z := rng.IntN(4)
	try:
		for range 100 {
			ni := z*perZone + rng.IntN(perZone)
			for _, sp := range busy[ni] {
				if sp.s < start+hours && start < sp.e {
					continue try
				}
			}
			busy[ni] = append(busy[ni], span{start, start + hours})
			out = append(out, Block{ID: fmt.Sprintf("b%06d", len(out)), State: StateScheduled, Count: 1,
				InstanceType: "h100.8x", GPUModel: "H100", Zone: f.Nodes[ni].Zone,
				Start:      benchNow.Add(time.Duration(start) * time.Hour),
				End:        benchNow.Add(time.Duration(start+hours) * time.Hour),
				Placements: []Placement{wholeNode(f.Nodes[ni].Name)}})
			break
		}
	}
	return out
}

// BenchmarkPlaceBigPool is the CPU cost of placing one purchase of one
// whole node for 1–48 hours at a random start over 8 weeks, and indexing
// it, on 10,000 nodes (pools of 2,500) with 0, 10,000 or 100,000 blocks
// booked.
func BenchmarkPlaceBigPool(b *testing.B) {
	for _, booked := range []int{0, 10_000, 100_000} {
		b.Run(fmt.Sprintf("booked=%d", booked), func(b *testing.B) {
			f := bigFleet()
			ix, err := NewIndex(&f, bigFleetBlocks(f, booked, rand.New(rand.NewPCG(3, 3))), benchNow)
			if err != nil {
				b.Fatal(err)
			}
			t, _ := ix.Fleet.Type("h100.8x")
			rng := rand.New(rand.NewPCG(9, 9))
			place := func(i int) {
				start := benchNow.Add(time.Duration(2+rng.IntN(8*7*24)) * time.Hour)
				req := PlaceRequest{Type: t, Count: 1, Zone: fmt.Sprintf("zone-%d", rng.IntN(4)), Start: start,
					End: start.Add(time.Duration(1+rng.IntN(48)) * time.Hour)}
				plan, err := ix.Place(req, benchNow)
				if err != nil {
					b.Fatalf("place: %v", err)
				}
				id := fmt.Sprintf("p%d", i)
				if err := ix.Add(Block{ID: id, State: StateScheduled, Count: req.Count, InstanceType: t.Name,
					Start: req.Start, End: req.End, Placements: plan.Placements}); err != nil {
					b.Fatal(err)
				}
				ix.Remove(id) // keep the booked count steady
			}
			place(-1) // whatever the first placement sets up is not counted
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				place(i)
			}
		})
	}
}

// BenchmarkPlaceFirst is the first placement after the index is built
// (a restart, or a rebuild after a conflict), on 10,000 nodes with
// 100,000 blocks booked: it builds the occupancy that placement reads
// (occupancy.go). It reports the heap the occupancy holds.
func BenchmarkPlaceFirst(b *testing.B) {
	f := bigFleet()
	ix, err := NewIndex(&f, bigFleetBlocks(f, 100_000, rand.New(rand.NewPCG(3, 3))), benchNow)
	if err != nil {
		b.Fatal(err)
	}
	t, _ := ix.Fleet.Type("h100.8x")
	req := PlaceRequest{Type: t, Count: 1, Zone: "zone-0", Start: benchNow.Add(100 * time.Hour), End: benchNow.Add(124 * time.Hour)}
	var before, after runtime.MemStats
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		ix.occ = nil
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		if _, err := ix.Place(req, benchNow); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ix)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "occupancy-MB")
}

// BenchmarkPlaceRepack is the CPU cost of a purchase that no set of nodes
// is free for although the hourly count allows it, so that tentative
// blocks are re-packed: requests of 1–4 nodes for 1–72 hours on the
// 1,000-node fleet of BenchmarkPlace with 10,000 blocks booked, where
// chains of overlapping blocks are long. It is not indexed.
func BenchmarkPlaceRepack(b *testing.B) {
	ix := benchIndex(b, 1_000, 20)
	t, _ := ix.Fleet.Type("h100.8x")
	rng := rand.New(rand.NewPCG(9, 9))
	full := uint64(1)<<8 - 1
	var reqs []PlaceRequest
	for len(reqs) < 3 {
		start := benchNow.Add(time.Duration(2+rng.IntN(8*7*24)) * time.Hour)
		req := PlaceRequest{Type: t, Count: 1 + rng.IntN(4), Zone: fmt.Sprintf("zone-%d", rng.IntN(3)), Start: start,
			End: start.Add(time.Duration(1+rng.IntN(72)) * time.Hour)}
		s, e := ix.hourOf(req.Start), ix.hourOf(req.End)
		ix.grow(e)
		p := ix.poolsFor(t, req.Zone)[0]
		free := 0
		for _, ni := range p.nodes {
			if ix.freeMask(ni, s, e, nil) == full {
				free++
			}
		}
		if len(p.nodes)-p.maxBusy(s, e) >= req.Count && free < req.Count {
			reqs = append(reqs, req)
		}
	}
	if _, err := ix.Place(reqs[0], benchNow); err != nil { // whatever the first placement sets up is not counted
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := ix.Place(reqs[i%len(reqs)], benchNow); err != nil {
			b.Fatal(err)
		}
	}
}
