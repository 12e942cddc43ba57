package core

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"time"
)

// The placement that Place made before it read the occupancy
// (occupancy.go): every candidate found by walking the pool's nodes, and
// every re-pack reading all of the pool's blocks. It is kept here, as it
// was, as the reference that TestPlaceAsTheReference holds Place to.

// refItem is repackItem as the reference knew it.
type refItem struct {
	id      string
	count   int
	s, e    int
	current []int
}

// refSplitOwn is splitOwn of extension.go.
func refSplitOwn(plan PlacementPlan, b Block) PlacementPlan {
	out := PlacementPlan{Placements: b.Placements}
	for _, m := range plan.Moves {
		if m.ID == b.ID {
			out.Placements = m.Placements
			continue
		}
		out.Moves = append(out.Moves, m)
	}
	return out
}

func (ix *Index) refPlace(req PlaceRequest, now time.Time) (PlacementPlan, error) {
	if req.Count < 1 {
		return PlacementPlan{}, Invalidf("instance count %d must be at least 1", req.Count)
	}
	s, e := ix.hourOf(req.Start), ix.hourOf(req.End)
	ix.grow(e)
	best := 0
	for _, p := range ix.poolsFor(req.Type, req.Zone) {
		if req.Type.GPUsPerInstance == p.gpus {
			plan, free, err := ix.refPlaceWhole(p, req.Count, s, e, now)
			if err == nil {
				return plan, nil
			}
			best = max(best, free)
			continue
		}
		pls, free := ix.refPlaceFractional(p, req.Type.GPUsPerInstance, req.Count, s, e)
		if pls != nil {
			return PlacementPlan{Placements: pls}, nil
		}
		best = max(best, free)
	}
	return PlacementPlan{}, fmt.Errorf("%w: only %d of %d %s free in %s from %s to %s", ErrNoCapacity,
		best, req.Count, req.Type.Name, req.Zone, req.Start.Format(time.RFC3339), req.End.Format(time.RFC3339))
}

func (ix *Index) refPlaceExtension(b Block, newEnd time.Time, now time.Time) (PlacementPlan, error) {
	s, e := ix.hourOf(b.End), ix.hourOf(newEnd)
	ix.grow(e)
	nope := fmt.Errorf("%w: the GPUs of block %s are not free from %s to %s", ErrNoCapacity, b.ID,
		b.End.Format(time.RFC3339), newEnd.Format(time.RFC3339))
	// 1. Its own GPUs, free after its end?
	free := true
	for _, pl := range b.Placements {
		ni, ok := ix.nodeIdx[pl.Node]
		if !ok {
			return PlacementPlan{}, fmt.Errorf("block %s: unknown node %s", b.ID, pl.Node)
		}
		want := maskOf(pl.GPUs)
		if ix.freeMask(ni, s, e, map[string]bool{b.ID: true})&want != want {
			free = false
			break
		}
	}
	if free {
		return PlacementPlan{Placements: b.Placements}, nil
	}
	// 2. Re-pack tentative whole-node blocks around it.
	t, ok := ix.Fleet.Type(b.InstanceType)
	if !ok || len(b.Placements) == 0 {
		return PlacementPlan{}, nope
	}
	ni := ix.nodeIdx[b.Placements[0].Node]
	p := ix.nodes[ni].pool
	if t.GPUsPerInstance != p.gpus {
		return PlacementPlan{}, nope
	}
	if b.Movable(now, ix.Fleet.Limits) {
		// It is one of the tentative blocks: re-pack it with its new end.
		ext := *ix.blocks[b.ID]
		ext.End = newEnd
		ix.blocks[b.ID] = &ext
		defer func() { ix.blocks[b.ID] = &b }()
		plan, ok := ix.refRepack(p, refItem{count: 0, s: s, e: e}, now)
		if !ok {
			return PlacementPlan{}, nope
		}
		return refSplitOwn(plan, b), nil
	}
	extra := map[int][]alloc{}
	tentative := map[string]bool{}
	for _, t := range ix.refTentativeIn(p, now) {
		tentative[t.ID] = true
	}
	for _, pl := range b.Placements {
		n := ix.nodeIdx[pl.Node]
		extra[n] = append(extra[n], alloc{block: b.ID, mask: maskOf(pl.GPUs), start: s, end: e})
		// Its new hours must not meet a block that cannot move (the
		// reference did not check; Place does, newRepackSweep).
		tentative[b.ID] = true
		if want := maskOf(pl.GPUs); ix.freeMask(n, s, e, tentative)&want != want {
			return PlacementPlan{}, nope
		}
	}
	plan, ok := ix.refRepack(p, refItem{count: 0, s: s, e: e}, now, extra)
	if !ok {
		return PlacementPlan{}, nope
	}
	plan.Placements = b.Placements
	return plan, nil
}

// placeWhole places count whole nodes of p over [s, e). It returns how
// many were free at the busiest hour when it fails.
func (ix *Index) refPlaceWhole(p *pool, count, s, e int, now time.Time) (PlacementPlan, int, error) {
	free := len(p.nodes) - p.maxBusy(s, e)
	if free < count {
		return PlacementPlan{}, max(free, 0), ErrNoCapacity
	}
	// 1. Nodes free for the whole window, as they stand.
	if nodes := ix.refFreeNodes(p, s, e, nil, nil); len(nodes) >= count {
		return PlacementPlan{Placements: ix.refWholePlacements(ix.refPickNodes(nodes, count))}, free, nil
	}
	// 2. Re-pack the tentative blocks of the pool around the fixed ones.
	plan, ok := ix.refRepack(p, refItem{count: count, s: s, e: e}, now)
	if !ok {
		return PlacementPlan{}, free, ErrNoCapacity
	}
	return plan, free, nil
}

func (ix *Index) refWholePlacements(nodes []int) []Placement {
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

// freeNodes lists the nodes of p with every GPU free over [s, e),
// ignoring blocks in skip and counting the extra allocations.
func (ix *Index) refFreeNodes(p *pool, s, e int, skip map[string]bool, extra map[int][]alloc) []int {
	full := uint64(1)<<p.gpus - 1
	if p.gpus == 64 {
		full = ^uint64(0)
	}
	var out []int
	for _, ni := range p.nodes {
		if ix.freeMask(ni, s, e, skip) != full {
			continue
		}
		if refOverlapsAny(extra[ni], s, e) {
			continue
		}
		out = append(out, ni)
	}
	return out
}

func refOverlapsAny(allocs []alloc, s, e int) bool {
	for _, a := range allocs {
		if a.start < e && a.end > s {
			return true
		}
	}
	return false
}

// pickNodes chooses count of the candidate nodes on as few racks as
// possible: the smallest rack that holds them all, or else the fullest
// racks first. Ties break by rack name; within a rack nodes keep the
// candidates' order, which is the pool's order, by name. It runs in time
// linear in the candidates, with no allocation but the result.
func (ix *Index) refPickNodes(cands []int, count int) []int {
	rackFree := map[int]int{}
	if count == 0 {
		return nil
	}
	// 1. Count the candidates of each rack.
	var racks []int
	for _, ni := range cands {
		r := ix.nodes[ni].rack
		if rackFree[r] == 0 {
			racks = append(racks, r)
		}
		rackFree[r]++
	}
	defer func() {
		for _, r := range racks {
			rackFree[r] = 0
		}
	}()
	// 2. Best fit: the smallest rack that holds the whole request.
	fit := -1
	for _, r := range racks {
		n := rackFree[r]
		if n >= count && (fit < 0 || n < rackFree[fit] || (n == rackFree[fit] && ix.rackNames[r] < ix.rackNames[fit])) {
			fit = r
		}
	}
	if fit >= 0 {
		return ix.refTakeFromRacks(cands, []int{fit}, count)
	}
	// 3. Else the fullest racks first.
	sort.Slice(racks, func(i, j int) bool {
		a, b := rackFree[racks[i]], rackFree[racks[j]]
		if a != b {
			return a > b
		}
		return ix.rackNames[racks[i]] < ix.rackNames[racks[j]]
	})
	need, used := count, 0
	for used < len(racks) && need > 0 {
		need -= rackFree[racks[used]]
		used++
	}
	return ix.refTakeFromRacks(cands, racks[:used], count)
}

// takeFromRacks returns up to count candidates on the given racks, rack by
// rack in the order given. With ix.Spread set, each rack's candidates are
// taken from a random place in their order, so that replicas deciding at
// the same time on the same stale snapshot seldom choose the same nodes.
func (ix *Index) refTakeFromRacks(cands, racks []int, count int) []int {
	out := make([]int, 0, count)
	for _, r := range racks {
		var inRack []int
		for _, ni := range cands {
			if ix.nodes[ni].rack == r {
				inRack = append(inRack, ni)
			}
		}
		off := 0
		if ix.Spread != nil && len(inRack) > 0 {
			off = ix.Spread(len(inRack))
		}
		for i := range inRack {
			if len(out) == count {
				return out
			}
			out = append(out, inRack[(off+i)%len(inRack)])
		}
	}
	return out
}

// placeFractional packs count instances of g GPUs best-fit on p's nodes
// over [s, e): fullest nodes first, so whole nodes stay free. It returns
// nil and the number of instances that would fit when it cannot.
func (ix *Index) refPlaceFractional(p *pool, g, count, s, e int) ([]Placement, int) {
	type cand struct {
		ni   int
		mask uint64
	}
	var cands []cand
	total := 0
	for _, ni := range p.nodes {
		m := ix.freeMask(ni, s, e, nil)
		if n := bits.OnesCount64(m) / g; n > 0 {
			cands = append(cands, cand{ni, m})
			total += n
		}
	}
	if total < count {
		return nil, total
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := bits.OnesCount64(cands[i].mask), bits.OnesCount64(cands[j].mask)
		if a != b {
			return a < b
		}
		return ix.nodes[cands[i].ni].node.Name < ix.nodes[cands[j].ni].node.Name
	})
	var out []Placement
	left := count
	for _, c := range cands {
		var gpus []int
		for m := c.mask; m != 0 && left > 0 && len(gpus)+g <= bits.OnesCount64(c.mask); {
			for range g {
				i := bits.TrailingZeros64(m)
				gpus = append(gpus, i)
				m &^= 1 << i
			}
			left--
		}
		out = append(out, Placement{Node: ix.nodes[c.ni].node.Name, GPUs: gpus})
		if left == 0 {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, total
}

func (ix *Index) refRepack(p *pool, item refItem, now time.Time, extra ...map[int][]alloc) (PlacementPlan, bool) {
	// 1. Split the pool's blocks into fixed and tentative.
	skip := map[string]bool{}
	var items []refItem
	for _, b := range ix.refTentativeIn(p, now) {
		skip[b.ID] = true
		it := refItem{id: b.ID, count: b.Count, s: ix.hourOf(b.Start), e: ix.hourOf(b.End)}
		for _, pl := range b.Placements {
			it.current = append(it.current, ix.nodeIdx[pl.Node])
		}
		items = append(items, it)
	}
	items = append(items, item)
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].s != items[j].s {
			return items[i].s < items[j].s
		}
		return items[i].e-items[i].s > items[j].e-items[j].s
	})
	// Only the tentative blocks chained to the request by overlapping
	// windows can be in its way; the others hold none of the hours that
	// chain spans, so they stay where they are, as if fixed.
	items = refComponentOf(items, item)
	for id := range skip {
		if !refContainsItem(items, id) {
			delete(skip, id)
		}
	}
	assigned := map[int][]alloc{}
	for _, x := range extra {
		for ni, as := range x {
			assigned[ni] = append(assigned[ni], as...)
		}
	}
	// 2. Assign in start order.
	var plan PlacementPlan
	for _, it := range items {
		free := ix.refFreeNodes(p, it.s, it.e, skip, assigned)
		if len(free) < it.count {
			return PlacementPlan{}, false
		}
		nodes := refKeepCurrent(it.current, free)
		if nodes == nil {
			nodes = ix.refPickNodes(free, it.count)
		}
		for _, ni := range nodes {
			assigned[ni] = append(assigned[ni], alloc{block: it.id, start: it.s, end: it.e})
		}
		if it.id == "" {
			plan.Placements = ix.refWholePlacements(nodes)
			continue
		}
		if !refSameNodes(it.current, nodes) {
			moved := *ix.blocks[it.id]
			moved.Placements = ix.refWholePlacements(nodes)
			plan.Moves = append(plan.Moves, moved)
		}
	}
	sort.Slice(plan.Moves, func(i, j int) bool { return plan.Moves[i].ID < plan.Moves[j].ID })
	return plan, true
}

// tentativeIn returns the movable whole-node blocks placed in pool p.
func (ix *Index) refTentativeIn(p *pool, now time.Time) []*Block {
	var out []*Block
	for _, b := range ix.blocks {
		if !b.Movable(now, ix.Fleet.Limits) || len(b.Placements) == 0 {
			continue
		}
		// Whole-node: one placement per instance, each a whole node (the
		// reference took a fractional block whose first placement fills a
		// node for a whole-node one, and moved it to Count whole nodes).
		ni, ok := ix.nodeIdx[b.Placements[0].Node]
		if !ok || ix.nodes[ni].pool != p || len(b.Placements) != b.Count ||
			slices.ContainsFunc(b.Placements, func(pl Placement) bool { return len(pl.GPUs) != p.gpus }) {
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// keepCurrent returns current when every one of its nodes is in free.
func refKeepCurrent(current, free []int) []int {
	if len(current) == 0 {
		return nil
	}
	in := map[int]bool{}
	for _, ni := range free {
		in[ni] = true
	}
	for _, ni := range current {
		if !in[ni] {
			return nil
		}
	}
	return current
}

func refSameNodes(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[int]bool{}
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}

// componentOf returns the items, sorted by start, whose windows chain by
// overlap to the window of it (included).
func refComponentOf(sorted []refItem, it refItem) []refItem {
	var comp []refItem
	end := -1
	found := false
	for _, x := range sorted {
		if x.s >= end && len(comp) > 0 { // a gap: a new chain starts
			if found {
				return comp
			}
			comp = comp[:0]
		}
		comp = append(comp, x)
		end = max(end, x.e)
		if x.id == it.id && x.s == it.s && x.e == it.e && x.count == it.count {
			found = true
		}
	}
	return comp
}

func refContainsItem(items []refItem, id string) bool {
	for _, x := range items {
		if x.id == id {
			return true
		}
	}
	return false
}
