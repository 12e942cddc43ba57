package core

import (
	"slices"
	"sort"
)

// occupancy is what placement reads instead of walking a pool's nodes:
// per pool, the nodes busy at each hour (any GPU booked) as sets in a tree
// over hours (hourTree), so that the nodes free for a window come from a
// few unions of sets, and the pool's tentative whole-node blocks by start
// hour (tentative.go), so that a re-pack reads only the blocks chained to
// its request.
//
// It is built from the index at the first placement and then follows it:
// install and uninstall (entry.go) call track and untrack for every block
// that enters or leaves the index. Node health is not tracked here: the
// few unhealthy nodes of a pool are found when needed (unhealthyIn).
type occupancy struct {
	pools map[*pool]*poolOcc
	pos   []int // each node's position in its pool's sets, by node index
	// tentative is, by id, where each block that may be tentative is
	// listed (tentative.go).
	tentative map[string]tentEntry
	// covered is scratch space for refresh.
	covered [][2]int
}

// poolOcc is the occupancy of one pool. Positions in its sets go rack by
// rack, racks by name, nodes by name within a rack, so that a rack is a
// range of positions.
type poolOcc struct {
	p     *pool
	nodes []int      // node index at each position
	racks []rackSpan // by rack name
	tree  hourTree
	// unhealthy caches the positions of the pool's unhealthy nodes (see
	// unhealthyIn).
	unhealthy []int
	// free is scratch space for freeOver.
	free nodeSet
	// starts lists, by start hour, the ids of the pool's blocks that may
	// be tentative, in no order; cross[h] counts those that hold both hour
	// h-1 and hour h (tentative.go).
	starts [][]string
	cross  []int32
}

// rackSpan is a rack's range of positions [lo, hi) in its pool.
type rackSpan struct{ rack, lo, hi int }

// occupancy returns the index's occupancy, built on first use.
func (ix *Index) occupancy() *occupancy {
	if ix.occ != nil {
		return ix.occ
	}
	occ := &occupancy{pools: map[*pool]*poolOcc{}, pos: make([]int, len(ix.nodes)), tentative: map[string]tentEntry{}}
	for _, p := range ix.pools {
		po := &poolOcc{p: p, nodes: slices.Clone(p.nodes)}
		// p.nodes is by name; a stable sort by rack name keeps that order
		// within a rack.
		sort.SliceStable(po.nodes, func(i, j int) bool {
			return ix.rackNames[ix.nodes[po.nodes[i]].rack] < ix.rackNames[ix.nodes[po.nodes[j]].rack]
		})
		hours := len(p.busy)
		for i, ni := range po.nodes {
			occ.pos[ni] = i
			if r := ix.nodes[ni].rack; len(po.racks) == 0 || po.racks[len(po.racks)-1].rack != r {
				po.racks = append(po.racks, rackSpan{rack: r, lo: i})
			}
			po.racks[len(po.racks)-1].hi = i + 1
			for a := range ix.nodes[ni].allocs.all() {
				hours = max(hours, a.end)
			}
		}
		po.free = newNodeSet(len(po.nodes))
		po.tree = newHourTree(len(po.free), hours)
		w := po.tree.words
		for i, ni := range po.nodes {
			word, bit := i>>6, uint64(1)<<(i&63)
			for a := range ix.nodes[ni].allocs.all() {
				if a.mask != 0 {
					for j := a.start*w + word; j < a.end*w; j += w {
						po.tree.levels[0][j] |= bit
					}
				}
			}
		}
		po.tree.resize(po.tree.hours) // compute the levels above the hours
		occ.pools[p] = po
	}
	ix.occ = occ
	occ.tentative = make(map[string]tentEntry, len(ix.blocks))
	for _, b := range ix.blocks {
		occ.list(ix, b, false)
	}
	occ.countCrossings()
	return occ
}

// nodeSpan is the hours [s, e) of node.
type nodeSpan struct{ node, s, e int }

// heldSpans returns, per node, the hours that block id holds in the
// index, its kept allocations included (nil before the occupancy is
// built: nothing follows the index yet). They come from the block's own
// versions (the one counted and, in flight, the one before, whose
// footprint covers what is kept of it), not from a scan of its nodes'
// allocations: the cost follows the block, not what its nodes hold.
func (ix *Index) heldSpans(id string) []nodeSpan {
	if ix.occ == nil {
		return nil
	}
	var versions [2]*Block
	if f := ix.flights[id]; f != nil {
		versions = [2]*Block{&f.block, f.prev}
	} else if b, ok := ix.blocks[id]; ok {
		versions[0] = b
	}
	var out []nodeSpan
	for _, b := range versions {
		if b == nil {
			continue
		}
		fp := ix.footprint(*b)
		if !fp.holds() {
			continue
		}
		for _, n := range fp.nodes {
			if i := slices.IndexFunc(out, func(sp nodeSpan) bool { return sp.node == n.node }); i >= 0 {
				out[i].s, out[i].e = min(out[i].s, fp.s), max(out[i].e, fp.e)
				continue
			}
			out = append(out, nodeSpan{node: n.node, s: fp.s, e: fp.e})
		}
	}
	return out
}

// track follows a block that install has just counted: its hours on its
// nodes, and its listing as a block that may be tentative.
func (ix *Index) track(id string) {
	if ix.occ == nil {
		return
	}
	ix.refresh(ix.heldSpans(id))
	ix.occ.unlist(id)
	if f := ix.flights[id]; f != nil {
		ix.occ.list(ix, &f.block, true)
	} else if b, ok := ix.blocks[id]; ok {
		ix.occ.list(ix, b, true)
	}
}

// untrack follows a block that uninstall has just stopped counting;
// spans are the hours it held, taken before.
func (ix *Index) untrack(id string, spans []nodeSpan) {
	if ix.occ == nil {
		return
	}
	ix.refresh(spans)
	ix.occ.unlist(id)
}

// refresh recomputes, over each span, whether its node is busy at each
// hour, from the node's allocations.
func (ix *Index) refresh(spans []nodeSpan) {
	for _, sp := range spans {
		ns := &ix.nodes[sp.node]
		po := ix.occ.pools[ns.pool]
		covered := ix.occ.covered[:0]
		for a := range ns.allocs.window(sp.s, sp.e) {
			if a.mask != 0 && a.end > sp.s {
				covered = append(covered, [2]int{a.start, a.end})
			}
		}
		po.tree.ensure(sp.e)
		po.tree.paint(ix.occ.pos[sp.node], sp.s, sp.e, covered)
		ix.occ.covered = covered
	}
}

// freeOver returns the pool's healthy nodes with no GPU booked at any
// hour of [s, e), in scratch space valid until the next call.
func (ix *Index) freeOver(po *poolOcc, s, e int) nodeSet {
	po.tree.busyOver(s, e, po.free)
	for i := range po.free {
		po.free[i] = ^po.free[i]
	}
	if n := len(po.nodes) & 63; n != 0 {
		po.free[len(po.free)-1] &= 1<<n - 1
	}
	for _, pos := range ix.unhealthyIn(po) {
		po.free.remove(pos)
	}
	return po.free
}

// unhealthyIn returns the positions of the pool's unhealthy nodes. The
// index counts them per pool (pool.unhealthy) but does not list them, so
// the list is cached: it is still right when every node in it is still
// unhealthy and it is as long as the count, and is rebuilt otherwise (a
// walk over the pool after a change of health).
func (ix *Index) unhealthyIn(po *poolOcc) []int {
	valid := len(po.unhealthy) == int(po.p.unhealthy)
	for _, pos := range po.unhealthy {
		valid = valid && ix.nodes[po.nodes[pos]].node.Health == Unhealthy
	}
	if valid {
		return po.unhealthy
	}
	po.unhealthy = po.unhealthy[:0]
	for pos, ni := range po.nodes {
		if ix.nodes[ni].node.Health == Unhealthy {
			po.unhealthy = append(po.unhealthy, pos)
		}
	}
	return po.unhealthy
}

// pickFree chooses count nodes of the set free on as few racks as
// possible: the smallest rack that holds them all, or else the fullest
// racks first. Ties break by rack name; within a rack nodes go by name.
// With ix.Spread set, each rack's nodes are taken from a random place in
// their order, so that replicas deciding at the same time on the same
// stale snapshot seldom choose the same nodes. It counts the set a rack
// at a time, and lists only the free nodes of the racks it takes from.
func (ix *Index) pickFree(po *poolOcc, free nodeSet, count int) []int {
	if count == 0 {
		return nil
	}
	// 1. Best fit: the smallest rack that holds the whole request.
	fit, fitN := -1, 0
	for i, r := range po.racks {
		if n := free.countRange(r.lo, r.hi); n >= count && (fit < 0 || n < fitN) {
			fit, fitN = i, n
		}
	}
	if fit >= 0 {
		return ix.takeFromRacks(po, free, []rackSpan{po.racks[fit]}, count)
	}
	// 2. Else the fullest racks first.
	type rackFree struct {
		span rackSpan
		n    int
	}
	var racks []rackFree
	for _, r := range po.racks {
		if n := free.countRange(r.lo, r.hi); n > 0 {
			racks = append(racks, rackFree{r, n})
		}
	}
	sort.SliceStable(racks, func(i, j int) bool { return racks[i].n > racks[j].n })
	var use []rackSpan
	for need := count; need > 0 && len(use) < len(racks); {
		need -= racks[len(use)].n
		use = append(use, racks[len(use)].span)
	}
	return ix.takeFromRacks(po, free, use, count)
}

// takeFromRacks returns up to count free nodes of the given racks, rack
// by rack in the order given.
func (ix *Index) takeFromRacks(po *poolOcc, free nodeSet, racks []rackSpan, count int) []int {
	out := make([]int, 0, count)
	var inRack []int
	for _, r := range racks {
		inRack = inRack[:0]
		for pos := free.next(r.lo); pos >= 0 && pos < r.hi; pos = free.next(pos + 1) {
			inRack = append(inRack, po.nodes[pos])
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
