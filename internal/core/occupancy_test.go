package core

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPlaceAsTheReference replays random purchases, extensions,
// cancellations, decisions in flight, node failures and the passing of
// time on two pools, and holds every decision of Place and
// PlaceExtension to the placement that walked every node
// (placement_ref_test.go): the same refusals, and the same nodes and
// moves where no tentative block is re-packed. A re-pack chooses its
// nodes otherwise than the reference did (it keeps what it can where it
// is, repackSweep.assign), so there the test holds it to what any right
// re-pack must do: the same count of nodes, moves of tentative blocks
// that change only their nodes, and no GPU in two blocks at once; and,
// over the whole run, no more moves than the reference made. After each
// step it checks the occupancy against the index.
func TestPlaceAsTheReference(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			c := newChurn(t, seed)
			for range 1500 {
				c.step()
				checkOccupancy(t, c.ix, c.rng)
			}
			t.Logf("%+v", c.seen)
			if c.seen.moves == 0 || c.seen.refused == 0 || c.seen.fractional == 0 || c.seen.extended == 0 || c.seen.kept == 0 {
				t.Fatalf("the workload should move blocks, refuse requests, place fractional ones, extend and keep some: %+v", c.seen)
			}
			if c.seen.moves > c.seen.refMoves || c.seen.onlyRef > c.seen.onlyGot {
				t.Fatalf("Place moved %d blocks and refused %d requests the reference granted; the reference moved %d and refused %d Place granted",
					c.seen.moves, c.seen.onlyRef, c.seen.refMoves, c.seen.onlyGot)
			}
		})
	}
}

// churn is a random workload on an index, checked against the reference.
type churn struct {
	t       *testing.T
	rng     *rand.Rand
	ix      *Index
	now     time.Time
	n       int
	pending []string // keys of decisions in flight
	seen    struct {
		placed, moves, refMoves, repacks, refused, fractional, extended, kept int
		onlyGot, onlyRef                                                      int // granted by Place alone, by the reference alone
	}
}

// churnFleet is three zones of 8-GPU H100 nodes, 40 in z, 12 in y and
// 150 in x (sets of three words), on racks whose names do not follow the
// nodes' names, sold whole and by 1 and 2 GPUs.
func churnFleet(rng *rand.Rand) Fleet {
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(), Types: []InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}},
		{Name: "h100.2x", GPUModel: "H100", GPUsPerInstance: 2, OnDemand: Money{Minor: 2458, Currency: "USD"}},
		{Name: "h100.1x", GPUModel: "H100", GPUsPerInstance: 1, OnDemand: Money{Minor: 1229, Currency: "USD"}},
	}}
	for i := range 202 {
		zone, racks := "z", []string{"rk", "ra", "rq", "rb", "rz", "rc"}
		switch {
		case i >= 52:
			zone, racks = "x", []string{"x7", "x1", "x5", "x3", "x2"}
		case i >= 40:
			zone, racks = "y", []string{"s2", "s1"}
		}
		f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("n%03d", i), Zone: zone, Rack: racks[rng.IntN(len(racks))],
			GPUModel: "H100", GPUs: 8, Health: Healthy})
	}
	return f
}

func newChurn(t *testing.T, seed uint64) *churn {
	rng := rand.New(rand.NewPCG(seed, 11))
	f := churnFleet(rng)
	ix, err := NewIndex(&f, nil, indexNow)
	if err != nil {
		t.Fatal(err)
	}
	return &churn{t: t, rng: rng, ix: ix, now: indexNow}
}

func (c *churn) step() {
	switch r := c.rng.IntN(100); {
	case r < 35:
		c.place("h100.8x", []string{"z", "z", "y", ""}[c.rng.IntN(4)], 1+c.rng.IntN(7))
	case r < 40:
		c.place("h100.8x", "x", 1+c.rng.IntN(40))
	case r < 52:
		c.place([]string{"h100.1x", "h100.2x"}[c.rng.IntN(2)], []string{"z", "y", "x", ""}[c.rng.IntN(4)], 1+c.rng.IntN(12))
	case r < 62:
		c.extend()
	case r < 70:
		c.cancel()
	case r < 73:
		c.toggleHealth()
	case r < 80:
		c.advance()
	default:
		c.settle()
	}
}

// spread returns the same choices for the same seed.
func spread(seed uint64) func(int) int {
	rng := rand.New(rand.NewPCG(seed, 5))
	return func(n int) int { return rng.IntN(n) }
}

func (c *churn) place(typ, zone string, count int) {
	c.t.Helper()
	ty, _ := c.ix.Fleet.Type(typ)
	start := c.now.Add(time.Duration(c.rng.IntN(200)) * time.Hour)
	req := PlaceRequest{Type: ty, Count: count, Zone: zone, Start: start,
		End: start.Add(time.Duration(1+c.rng.IntN(40)) * time.Hour)}
	seed := c.rng.Uint64()
	c.ix.Spread = spread(seed)
	got, gotErr := c.ix.Place(req, c.now)
	c.ix.Spread = spread(seed)
	want, wantErr := c.ix.refPlace(req, c.now)
	c.ix.Spread = nil
	b := Block{ID: fmt.Sprintf("b%04d", c.n+1), Team: "t1", InstanceType: typ, GPUModel: "H100", Zone: req.Zone, Count: count,
		State: StateScheduled, Start: req.Start, End: req.End, Placements: got.Placements}
	c.compare(fmt.Sprintf("Place(%d × %s in %q, hours %d..%d)", count, typ, req.Zone, c.ix.hourOf(req.Start), c.ix.hourOf(req.End)),
		got, gotErr, want, wantErr, b, nil)
	if gotErr != nil {
		c.seen.refused++
		return
	}
	c.seen.placed++
	if ty.GPUsPerInstance < 8 {
		c.seen.fractional++
	}
	c.n++
	if c.rng.IntN(10) == 0 && !req.Start.After(c.now.Add(time.Hour)) {
		b.State = StateActive
	}
	c.apply(b, got.Moves)
}

// apply indexes a decision: committed at once, or assumed and left in
// flight for a while.
func (c *churn) apply(b Block, moves []Block) {
	c.t.Helper()
	if c.rng.IntN(3) == 0 {
		key := "d-" + b.ID + fmt.Sprint(c.n)
		if err := c.ix.AssumeAs(key, append([]Block{b}, moves...)...); err == nil {
			c.pending = append(c.pending, key)
			return
		} else if !errors.Is(err, ErrConflict) {
			c.t.Fatal(err)
		}
		return // a block it moves is in another decision: not applied
	}
	for _, m := range append(moves, b) {
		if err := c.ix.Add(m); err != nil {
			c.t.Fatal(err)
		}
	}
}

// compare holds a decision to the reference's. b is the block placed or
// extended, with the placements got gives it; was is its placements
// before, for an extension.
func (c *churn) compare(what string, got PlacementPlan, gotErr error, want PlacementPlan, wantErr error, b Block, was []Placement) {
	c.t.Helper()
	switch {
	case fmt.Sprint(gotErr) == fmt.Sprint(wantErr):
	case gotErr == nil && errors.Is(wantErr, ErrNoCapacity):
		// A re-pack is sure to succeed only when every fixed block starts
		// before every tentative one; here fractional blocks are fixed
		// and start anywhere, so whether it fits depends on the nodes
		// chosen before.
		c.seen.onlyGot++
	case wantErr == nil && errors.Is(gotErr, ErrNoCapacity):
		c.seen.onlyRef++
		return
	default:
		c.t.Fatalf("%s: error %v, the reference %v", what, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	c.seen.moves += len(got.Moves)
	c.seen.refMoves += len(want.Moves)
	repacked := wantErr != nil || len(got.Moves) > 0 || len(want.Moves) > 0 ||
		was != nil && (!cmp.Equal(was, got.Placements) || !cmp.Equal(was, want.Placements)) ||
		c.notFirstPool(b, want)
	if !repacked {
		if diff := cmp.Diff(want, got); diff != "" {
			c.t.Fatalf("%s differs from the reference (-want +got):\n%s", what, diff)
		}
		return
	}
	c.seen.repacks++
	ty, _ := c.ix.Fleet.Type(b.InstanceType)
	gpus := 0
	for _, p := range got.Placements {
		gpus += len(p.GPUs)
	}
	if gpus != b.Count*ty.GPUsPerInstance {
		c.t.Fatalf("%s: %d GPUs placed for %d × %s", what, gpus, b.Count, ty.Name)
	}
	from := b.Start
	if was != nil && cmp.Equal(was, got.Placements) {
		from = c.ix.blocks[b.ID].End // an extension in place: only its new hours are new
	}
	if err := planConflict(c.ix, b, from, got.Moves, c.now); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// notFirstPool reports whether want placed b in a pool after the first
// that b's type and zone allow: a re-pack tried in an earlier pool took
// other draws of Spread than the reference's, so the nodes of the next
// pool may differ although both found them free as they stand.
func (c *churn) notFirstPool(b Block, want PlacementPlan) bool {
	ty, _ := c.ix.Fleet.Type(b.InstanceType)
	pools := c.ix.poolsFor(ty, b.Zone)
	if len(want.Placements) == 0 || len(pools) < 2 {
		return false
	}
	return c.ix.nodes[c.ix.nodeIdx[want.Placements[0].Node]].pool != pools[0]
}

// planConflict checks a re-pack's plan against the index: each move is
// of a tentative block, to as many whole nodes as it had, and changes
// nothing else; no GPU of the block placed (b, from from on) or of a
// moved block is held by another block at an overlapping time, once the
// moves apply.
func planConflict(ix *Index, b Block, from time.Time, moves []Block, now time.Time) error {
	after := map[string]Block{b.ID: b}
	for _, m := range moves {
		old, ok := ix.blocks[m.ID]
		if !ok || !old.Movable(now, ix.Fleet.Limits) {
			return fmt.Errorf("moves %s, which is not a tentative block", m.ID)
		}
		moved := *old
		moved.Placements = m.Placements
		if !cmp.Equal(moved, m) || len(m.Placements) != len(old.Placements) {
			return fmt.Errorf("the move of %s changes more than its nodes:\n%s", m.ID, cmp.Diff(*old, m))
		}
		after[m.ID] = m
	}
	others := []Block{}
	for _, o := range ix.blocks {
		if _, ok := after[o.ID]; !ok {
			others = append(others, *o)
		}
	}
	for _, o := range after {
		others = append(others, o)
	}
	for id, x := range after {
		if id == b.ID {
			x.Start = from
		}
		for _, o := range others {
			if o.ID == id || !o.Start.Before(x.End) || !x.Start.Before(o.End) {
				continue
			}
			for _, p := range x.Placements {
				for _, q := range o.Placements {
					if p.Node == q.Node && slices.ContainsFunc(p.GPUs, func(g int) bool { return slices.Contains(q.GPUs, g) }) {
						return fmt.Errorf("node %s is in %s (%v..%v %s) and %s (%v..%v %s %v) at overlapping times", p.Node, id, x.Start, x.End, x.State, o.ID, o.Start, o.End, o.State, o.Placements)
					}
				}
			}
		}
	}
	return nil
}

// live returns a random live block, or nil.
func (c *churn) live() *Block {
	bs := c.ix.Blocks()
	if len(bs) == 0 {
		return nil
	}
	slices.SortFunc(bs, func(a, b *Block) int { return cmpString(a.ID, b.ID) })
	return bs[c.rng.IntN(len(bs))]
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *churn) extend() {
	c.t.Helper()
	b := c.live()
	if b == nil || c.ix.Assumed(b.ID) {
		return
	}
	newEnd := b.End.Add(time.Duration(1+c.rng.IntN(20)) * time.Hour)
	seed := c.rng.Uint64()
	c.ix.Spread = spread(seed)
	got, gotErr := c.ix.PlaceExtension(*b, newEnd, c.now)
	c.ix.Spread = spread(seed)
	want, wantErr := c.ix.refPlaceExtension(*b, newEnd, c.now)
	c.ix.Spread = nil
	ext := *b
	ext.End, ext.Placements = newEnd, got.Placements
	c.compare(fmt.Sprintf("PlaceExtension(%s to hour %d)", b.ID, c.ix.hourOf(newEnd)), got, gotErr, want, wantErr, ext, b.Placements)
	if gotErr != nil {
		return
	}
	c.seen.extended++
	c.apply(ext, got.Moves)
}

func (c *churn) cancel() {
	if b := c.live(); b != nil && !c.ix.Assumed(b.ID) {
		gone := *b
		gone.State = StateCancelled
		if err := c.ix.Add(gone); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *churn) toggleHealth() {
	n := c.ix.Fleet.Nodes[c.rng.IntN(len(c.ix.Fleet.Nodes))].Name
	h := Unhealthy
	if node, _ := c.ix.Node(n); node.Health == Unhealthy {
		h = Healthy
	}
	if err := c.ix.SetHealth(n, h); err != nil {
		c.t.Fatal(err)
	}
}

// advance moves time on, and makes some blocks that have started active.
func (c *churn) advance() {
	c.now = c.now.Add(time.Duration(1+c.rng.IntN(4)) * time.Hour)
	bs := c.ix.Blocks()
	slices.SortFunc(bs, func(a, b *Block) int { return cmpString(a.ID, b.ID) }) // the same draws each run
	for _, b := range bs {
		if b.State == StateScheduled && !b.Start.After(c.now) && !c.ix.Assumed(b.ID) && c.rng.IntN(2) == 0 {
			act := *b
			act.State = StateActive
			if err := c.ix.Add(act); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// settle confirms or forgets a decision in flight.
func (c *churn) settle() {
	if len(c.pending) == 0 {
		return
	}
	i := c.rng.IntN(len(c.pending))
	key := c.pending[i]
	c.pending = slices.Delete(c.pending, i, i+1)
	if c.rng.IntN(2) == 0 {
		c.ix.Confirm(key)
	} else {
		c.ix.Forget(key)
	}
	c.seen.kept++
}

// checkOccupancy holds the occupancy, once built, to what the index holds:
// the nodes free over random windows, and the blocks listed as maybe
// tentative with their crossings.
func checkOccupancy(t *testing.T, ix *Index, rng *rand.Rand) {
	t.Helper()
	if ix.occ == nil {
		return
	}
	for _, p := range ix.pools {
		po := ix.occ.pools[p]
		// 1. Free nodes.
		for range 3 {
			s := rng.IntN(300)
			e := s + 1 + rng.IntN(60)
			var got, want []string
			free := ix.freeOver(po, s, e)
			for pos := free.next(0); pos >= 0; pos = free.next(pos + 1) {
				got = append(got, ix.nodes[po.nodes[pos]].node.Name)
			}
			for _, ni := range p.nodes {
				if bits.OnesCount64(ix.freeMask(ni, s, e, nil)) == p.gpus {
					want = append(want, ix.nodes[ni].node.Name)
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("pool %s/%s: nodes free over hours %d..%d (-freeMask +occupancy):\n%s", p.model, p.zone, s, e, diff)
			}
		}
		// 2. Listed blocks.
		wantStarts := map[int][]string{}
		var wantCross []int32
		for _, b := range ix.blocks {
			if !b.State.Live() || b.State == StateActive || len(b.Placements) == 0 {
				continue
			}
			ni := ix.nodeIdx[b.Placements[0].Node]
			s, e := ix.hourOf(b.Start), ix.hourOf(b.End)
			if ix.nodes[ni].pool != p || len(b.Placements) != b.Count || e <= s ||
				slices.ContainsFunc(b.Placements, func(pl Placement) bool { return len(pl.GPUs) != p.gpus }) {
				continue
			}
			wantStarts[s] = append(wantStarts[s], b.ID)
			if len(wantCross) < e {
				wantCross = append(wantCross, make([]int32, e-len(wantCross))...)
			}
			for h := s + 1; h < e; h++ {
				wantCross[h]++
			}
		}
		for h := range max(len(po.starts), len(po.cross), len(wantCross)) {
			var got []string
			if h < len(po.starts) {
				got = slices.Sorted(slices.Values(po.starts[h]))
			}
			slices.Sort(wantStarts[h])
			if !slices.Equal(got, wantStarts[h]) {
				t.Fatalf("pool %s/%s: blocks listed at hour %d: %v, want %v", p.model, p.zone, h, got, wantStarts[h])
			}
			var cross int32
			if h < len(po.cross) {
				cross = po.cross[h]
			}
			var want int32
			if h < len(wantCross) {
				want = wantCross[h]
			}
			if cross != want {
				t.Fatalf("pool %s/%s: %d blocks listed as crossing hour %d, want %d", p.model, p.zone, cross, h, want)
			}
		}
	}
}
