package core

import (
	"fmt"
	"math/bits"
	"sort"
	"time"
)

// PlaceRequest asks for Count instances of Type in Zone over [Start, End).
type PlaceRequest struct {
	Type  InstanceType
	Count int
	Zone  string
	Start time.Time
	End   time.Time
}

// PlacementPlan is a placement decision: where the new instances go, and
// which tentative blocks move to make room (with their new placements).
type PlacementPlan struct {
	Placements []Placement
	Moves      []Block
}

// Place decides where a new block goes. Whole-node types are granted when,
// at every hour of the window, the nodes already busy plus the request fit
// the pool; when no set of nodes is free for the whole window, tentative
// blocks (scheduled, before their lock-in point) are re-packed in start
// order, which always succeeds in that case because every fixed block
// starts before every tentative one. Fractional types are packed best-fit
// on the nodes free for the window. A request is granted whole or refused
// with ErrNoCapacity, never shortened.
func (ix *Index) Place(req PlaceRequest, now time.Time) (PlacementPlan, error) {
	if req.Count < 1 {
		return PlacementPlan{}, Invalidf("instance count %d must be at least 1", req.Count)
	}
	s, e := ix.hourOf(req.Start), ix.hourOf(req.End)
	ix.grow(e)
	best := 0
	for _, p := range ix.poolsFor(req.Type, req.Zone) {
		if req.Type.GPUsPerInstance == p.gpus {
			plan, free, err := ix.placeWhole(p, req.Count, s, e, now)
			if err == nil {
				return plan, nil
			}
			best = max(best, free)
			continue
		}
		pls, free := ix.placeFractional(p, req.Type.GPUsPerInstance, req.Count, s, e)
		if pls != nil {
			return PlacementPlan{Placements: pls}, nil
		}
		best = max(best, free)
	}
	return PlacementPlan{}, fmt.Errorf("%w: only %d of %d %s free in %s from %s to %s", ErrNoCapacity,
		best, req.Count, req.Type.Name, req.Zone, req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339))
}

// poolsFor returns the pools of zone (all zones when empty) that can hold
// instances of t.
func (ix *Index) poolsFor(t InstanceType, zone string) []*pool {
	var out []*pool
	for _, p := range ix.pools {
		if p.model == t.GPUModel && (zone == "" || p.zone == zone) && t.GPUsPerInstance > 0 && p.gpus%t.GPUsPerInstance == 0 {
			out = append(out, p)
		}
	}
	return out
}

// maxBusy is the largest busy count of p over [s, e).
func (p *pool) maxBusy(s, e int) int {
	m := int32(0)
	for h := s; h < e; h++ {
		m = max(m, p.busyAt(h))
	}
	return int(m)
}

func (p *pool) busyAt(h int) int32 {
	if h < len(p.busy) {
		return p.busy[h]
	}
	return p.unhealthy // beyond the arrays only unhealthy nodes are busy
}

// placeWhole places count whole nodes of p over [s, e). It returns how
// many were free at the busiest hour when it fails.
func (ix *Index) placeWhole(p *pool, count, s, e int, now time.Time) (PlacementPlan, int, error) {
	free := len(p.nodes) - p.maxBusy(s, e)
	if free < count {
		return PlacementPlan{}, max(free, 0), ErrNoCapacity
	}
	// 1. Nodes free for the whole window, as they stand.
	po := ix.occupancy().pools[p]
	if nodes := ix.freeOver(po, s, e); nodes.count() >= count {
		return PlacementPlan{Placements: ix.wholePlacements(ix.pickFree(po, nodes, count))}, free, nil
	}
	// 2. Re-pack the tentative blocks of the pool around the fixed ones.
	plan, ok := ix.repack(p, repackItem{count: count, s: s, e: e}, now)
	if !ok {
		return PlacementPlan{}, free, ErrNoCapacity
	}
	return plan, free, nil
}

func (ix *Index) wholePlacements(nodes []int) []Placement {
	out := make([]Placement, len(nodes))
	for i, ni := range nodes {
		n := ix.nodes[ni].node
		gpus := make([]int, n.GPUs)
		for g := range gpus {
			gpus[g] = g
		}
		out[i] = Placement{Node: n.Name, GPUs: gpus}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// placeFractional packs count instances of g GPUs best-fit on p's nodes
// over [s, e): fullest nodes first, so whole nodes stay free. It returns
// nil and the number of instances that would fit when it cannot. Only the
// nodes busy at some hour of the window are read one by one; the wholly
// free ones come after them, by name, as many as are needed.
func (ix *Index) placeFractional(p *pool, g, count, s, e int) ([]Placement, int) {
	type cand struct {
		ni   int
		mask uint64
	}
	// 1. The nodes partly free for the window, and how many are wholly so.
	po := ix.occupancy().pools[p]
	busy := newNodeSet(len(po.nodes))
	po.tree.busyOver(s, e, busy)
	var cands []cand
	total := 0
	for pos := busy.next(0); pos >= 0; pos = busy.next(pos + 1) {
		ni := po.nodes[pos]
		m := ix.freeMask(ni, s, e, nil)
		if n := bits.OnesCount64(m) / g; n > 0 {
			cands = append(cands, cand{ni, m})
			total += n
		}
	}
	free := ix.freeOver(po, s, e)
	total += free.count() * (p.gpus / g)
	if total < count {
		return nil, total
	}
	// 2. Fullest first: the partly free nodes (fewest free GPUs first),
	// then the wholly free ones, by name.
	sort.Slice(cands, func(i, j int) bool {
		a, b := bits.OnesCount64(cands[i].mask), bits.OnesCount64(cands[j].mask)
		if a != b {
			return a < b
		}
		return ix.nodes[cands[i].ni].node.Name < ix.nodes[cands[j].ni].node.Name
	})
	var out []Placement
	left := count
	take := func(ni int, mask uint64) {
		var gpus []int
		for m := mask; m != 0 && left > 0 && len(gpus)+g <= bits.OnesCount64(mask); {
			for range g {
				i := bits.TrailingZeros64(m)
				gpus = append(gpus, i)
				m &^= 1 << i
			}
			left--
		}
		out = append(out, Placement{Node: ix.nodes[ni].node.Name, GPUs: gpus})
	}
	for _, c := range cands {
		if left == 0 {
			break
		}
		take(c.ni, c.mask)
	}
	full := uint64(1)<<p.gpus - 1
	if p.gpus == 64 {
		full = ^uint64(0)
	}
	for i := 0; left > 0 && i < len(p.nodes); i++ {
		if ni := p.nodes[i]; free.has(ix.occ.pos[ni]) {
			take(ni, full)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, total
}
