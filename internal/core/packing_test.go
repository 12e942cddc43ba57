package core

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPackingWholeNodes replays random whole-node requests, in random
// order of start, on a 64-node pool. Every request the hour-by-hour booked
// count allows must be granted whole, every other one refused, and no node
// may ever be in two blocks at once.
func TestPackingWholeNodes(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { replayPacking(t, seed, 2000) })
	}
}

func replayPacking(t *testing.T, seed uint64, requests int) {
	const nodes, horizon = 64, 4 * 7 * 24
	rng := rand.New(rand.NewPCG(seed, seed))
	f := packingFleet(nodes, 2)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ix, err := NewIndex(&f, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	typ := f.Types[0]
	booked := make([]int, horizon+48) // the independent hour-by-hour count
	accepted, moves := 0, 0
	for i := range requests {
		count, hours := 1+rng.IntN(4), 1+rng.IntN(24)
		start := 2 + rng.IntN(horizon) // after the lock-in point: all tentative
		fits := true
		for h := start; h < start+hours; h++ {
			fits = fits && booked[h]+count <= nodes
		}
		plan, err := ix.Place(PlaceRequest{Type: typ, Count: count, Zone: "z",
			Start: now.Add(time.Duration(start) * time.Hour), End: now.Add(time.Duration(start+hours) * time.Hour)}, now)
		if fits != (err == nil) {
			t.Fatalf("request %d (%d nodes, hours %d..%d): count allows it = %v, but Place said %v", i, count, start, start+hours, fits, err)
		}
		if err != nil {
			continue
		}
		if len(plan.Placements) != count {
			t.Fatalf("request %d: asked %d nodes, got %d", i, count, len(plan.Placements))
		}
		for _, m := range plan.Moves {
			if err := ix.Add(m); err != nil {
				t.Fatal(err)
			}
		}
		moves += len(plan.Moves)
		b := Block{ID: fmt.Sprintf("b%d", i), InstanceType: typ.Name, Count: count, Zone: "z", State: StateScheduled,
			Start: now.Add(time.Duration(start) * time.Hour), End: now.Add(time.Duration(start+hours) * time.Hour), Placements: plan.Placements}
		if err := ix.Add(b); err != nil {
			t.Fatal(err)
		}
		for h := start; h < start+hours; h++ {
			booked[h] += count
		}
		accepted++
	}
	assertNoDoubleBooking(t, ix)
	t.Logf("%d of %d requests accepted, %d tentative blocks moved", accepted, requests, moves)
	if accepted == requests || accepted == 0 {
		t.Fatalf("the workload should accept some and refuse some requests, accepted %d of %d", accepted, requests)
	}
}

// packingFleet is one zone of n 8-GPU H100 nodes on racks of rackSize.
func packingFleet(n, racks int) Fleet {
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(),
		Types: []InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}}}}
	for i := range n {
		f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("n%05d", i), Zone: "z", Rack: fmt.Sprintf("r%d", i%racks),
			GPUModel: "H100", GPUs: 8, Health: Healthy})
	}
	return f
}

// assertNoDoubleBooking checks from the blocks' placements alone that no
// GPU is held by two blocks at overlapping times.
func assertNoDoubleBooking(t *testing.T, ix *Index) {
	t.Helper()
	type key struct {
		node string
		gpu  int
	}
	held := map[key][]*Block{}
	for _, b := range ix.Blocks() {
		for _, p := range b.Placements {
			for _, g := range p.GPUs {
				k := key{p.Node, g}
				for _, o := range held[k] {
					if o.Start.Before(b.End) && b.Start.Before(o.End) {
						t.Fatalf("GPU %s/%d is in %s and %s at overlapping times", p.Node, g, o.ID, b.ID)
					}
				}
				held[k] = append(held[k], b)
			}
		}
	}
}
