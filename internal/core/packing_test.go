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

// TestRepackCascade: a request for one node over hours 10..30, which no
// node is free for as things stand, on 8 nodes that each hold a 7-hour
// tentative block, the blocks staggered by an hour (n0 from hour 12, n1
// from 13, ...), so that 7 of them at most hold any hour. Taking the
// first node for it, as the re-pack did (the reference), moved every
// block in turn: each one's node was taken by the one before. The
// re-pack takes the node whose block starts last, and moves that block
// alone.
func TestRepackCascade(t *testing.T) {
	f := packingFleet(8, 1)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ix, err := NewIndex(&f, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return now.Add(time.Duration(h) * time.Hour) }
	typ := f.Types[0]
	for i := range 8 {
		b := Block{ID: fmt.Sprintf("b%d", i), InstanceType: typ.Name, Count: 1, Zone: "z", State: StateScheduled,
			Start: at(12 + i), End: at(19 + i), Placements: ix.wholePlacements([]int{ix.nodeIdx[f.Nodes[i].Name]})}
		if err := ix.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	req := PlaceRequest{Type: typ, Count: 1, Zone: "z", Start: at(10), End: at(30)}
	want, err := ix.refPlace(req, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ix.Place(req, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Moves) != 8 {
		t.Fatalf("the reference moved %d blocks, want the cascade of 8 this test is about", len(want.Moves))
	}
	if len(got.Moves) != 1 || got.Moves[0].ID != "b7" || got.Placements[0].Node != "n00007" {
		t.Fatalf("the re-pack placed the request on %v and moved %d blocks (%v), want n00007, moving b7 alone", got.Placements, len(got.Moves), got.Moves)
	}
	b := Block{ID: "new", InstanceType: typ.Name, Count: 1, Zone: "z", State: StateScheduled, Start: req.Start, End: req.End, Placements: got.Placements}
	for _, m := range append(got.Moves, b) {
		if err := ix.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	assertNoDoubleBooking(t, ix)
}

// TestRepackMovesFewer replays the random whole-node requests of
// TestPackingWholeNodes on two indexes, one placing with Place, the
// other with the reference's re-pack (placement_ref_test.go), which
// took any free nodes and so moved chains of blocks. Both grant the
// same requests; Place must move at most a tenth as many blocks.
func TestRepackMovesFewer(t *testing.T) {
	const nodes, horizon, requests = 64, 4 * 7 * 24, 1000
	rng := rand.New(rand.NewPCG(2026, 12))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var ixs [2]*Index
	for i := range ixs {
		f := packingFleet(nodes, 2)
		ix, err := NewIndex(&f, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		ixs[i] = ix
	}
	var moves, granted [2]int
	for i := range requests {
		count, start, hours := 1+rng.IntN(4), 2+rng.IntN(horizon), 1+rng.IntN(24)
		req := PlaceRequest{Type: ixs[0].Fleet.Types[0], Count: count, Zone: "z",
			Start: now.Add(time.Duration(start) * time.Hour), End: now.Add(time.Duration(start+hours) * time.Hour)}
		for k, ix := range ixs {
			place := ix.Place
			if k == 1 {
				place = ix.refPlace
			}
			plan, err := place(req, now)
			if err != nil {
				continue
			}
			b := Block{ID: fmt.Sprintf("b%d", i), InstanceType: req.Type.Name, Count: count, Zone: "z", State: StateScheduled,
				Start: req.Start, End: req.End, Placements: plan.Placements}
			for _, m := range append(plan.Moves, b) {
				if err := ix.Add(m); err != nil {
					t.Fatal(err)
				}
			}
			moves[k] += len(plan.Moves)
			granted[k]++
		}
	}
	for _, ix := range ixs {
		assertNoDoubleBooking(t, ix)
	}
	t.Logf("granted %d, moved %d; the reference granted %d, moved %d", granted[0], moves[0], granted[1], moves[1])
	if granted[0] != granted[1] {
		t.Fatalf("granted %d requests, the reference %d", granted[0], granted[1])
	}
	if moves[1] == 0 || moves[0]*10 > moves[1] {
		t.Fatalf("moved %d blocks, the reference %d: want at most a tenth", moves[0], moves[1])
	}
}
