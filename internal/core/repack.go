package core

import (
	"container/heap"
	"slices"
	"sort"
	"time"
)

// repackItem is one whole-node request in a re-pack: a tentative block
// (id set, current nodes known) or the new request (id empty).
type repackItem struct {
	id      string
	count   int
	s, e    int
	current []int
}

// repack re-assigns the tentative whole-node blocks of pool p chained to
// the new item by overlapping windows, together with the item, to nodes.
// Fixed blocks (active, locked or fractional) stay where they are. Items
// go in start order, each to nodes free of fixed blocks and of items
// already assigned; extra holds fixed allocations not yet in the index
// (an extension being planned).
//
// Placing intervals in start order on whatever nodes are free uses no more
// nodes at any hour than the hour's demand (interval graphs are perfect),
// so when the hour-by-hour count fits, this never fails as long as every
// fixed block starts before every tentative one, which lock-in guarantees.
// Which free nodes an item gets is therefore free to choose, and it is
// chosen so that only what must move moves (repackSweep.assign): a
// tentative block keeps those of its nodes that are free; the rest of
// what an item needs comes first from nodes that no later item of the
// chain holds in an overlapping window, since taking a node a later item
// holds moves that item too, and it may take another's in turn.
//
// Its cost follows the chain, not the pool: the chain's blocks come from
// the pool's list by start (chainOf), and the nodes free for each item
// from a sweep over the chain's hours (repackSweep) that visits a node
// only when its state changes or it is chosen.
func (ix *Index) repack(p *pool, item repackItem, now time.Time, extra ...map[int][]alloc) (PlacementPlan, bool) {
	if item.e <= item.s {
		return PlacementPlan{}, false
	}
	po := ix.occupancy().pools[p]
	// 1. The tentative blocks chained to the request, in start order.
	items := ix.chainOf(po, item, now)
	skip := map[string]bool{}
	s, e := items[0].s, items[0].e
	for _, it := range items {
		if it.id != "" {
			skip[it.id] = true
		}
		e = max(e, it.e)
	}
	// 2. Assign in start order.
	sw := ix.newRepackSweep(po, s, e, skip, extra)
	if sw == nil {
		return PlacementPlan{}, false
	}
	sw.setClaims(items)
	var plan PlacementPlan
	for i, it := range items {
		nodes, ok := sw.assign(i)
		if !ok {
			return PlacementPlan{}, false
		}
		if it.id == "" {
			plan.Placements = ix.wholePlacements(nodes)
			continue
		}
		if !sameNodes(it.current, nodes) {
			moved := *ix.blocks[it.id]
			moved.Placements = ix.wholePlacements(nodes)
			plan.Moves = append(plan.Moves, moved)
		}
	}
	sort.Slice(plan.Moves, func(i, j int) bool { return plan.Moves[i].ID < plan.Moves[j].ID })
	return plan, true
}

// repackSweep assigns re-pack items to nodes in start order over the
// hours [s, e) of a chain. At the hour it has reached, each healthy node
// of the pool, by position, is
//   - clear: free from now to e of anything fixed and of the items
//     assigned so far (in the set clear);
//   - open: free now, and held from next[pos] by something fixed (in the
//     set open, and in the heap opens by that hour);
//   - held: held now, by something fixed or an item it was given, until
//     wake[pos] (in the heap waits by that hour).
//
// A node is free for an item [s, e) when it is clear, or open with
// next[pos] ≥ e; the open ones that are not are found in the heap opens
// without visiting the others.
type repackSweep struct {
	ix *Index
	po *poolOcc
	// fixed holds, by position, the merged hours within the chain's that
	// fixed allocations hold; k the first of them not yet over.
	fixed   [][][2]int
	k       []int
	state   []sweepState
	release []int // the end of the last item the node was given
	next    []int
	wake    []int
	clear   nodeSet
	open    nodeSet
	nClear  int
	nOpen   int
	opens   hourHeap
	waits   hourHeap
	// stamp marks the open nodes found held before the current item's
	// end; walk and free are scratch space.
	stamp []int
	item  int
	walk  []int
	free  nodeSet
	// The chain's items that hold a node now and are not yet assigned,
	// its claims: holds lists (item, next) for each node an item holds,
	// next the entry of the node's next item in start order or -1;
	// head[pos] is the node's first entry not yet passed, claimAt[pos]
	// the start of its item (noClaim when none). claimedFree lists the
	// free nodes claimed before the current item's end.
	holds       []hold
	head        []int
	claimAt     []int
	claimedFree []int
	items       []repackItem
}

// hold is an item of a re-pack that holds a node now, and the entry of
// the node's next such item.
type hold struct{ item, next int }

// noClaim is claimAt of a node that no later item of the chain holds.
const noClaim = int(^uint(0) >> 1)

// sweepState is a node's state in a repackSweep.
type sweepState uint8

const (
	sweepOut sweepState = iota // unhealthy: never free
	sweepClear
	sweepOpen
	sweepHeld
)

// newRepackSweep sets up the sweep of the chain's hours [s, e): what
// holds each node then, but for the blocks in skip (the chain's), and the
// extra allocations; nil when an extra allocation meets a fixed one.
func (ix *Index) newRepackSweep(po *poolOcc, s, e int, skip map[string]bool, extra []map[int][]alloc) *repackSweep {
	n := len(po.nodes)
	sw := &repackSweep{ix: ix, po: po, fixed: make([][][2]int, n), k: make([]int, n), state: make([]sweepState, n),
		release: make([]int, n), next: make([]int, n), wake: make([]int, n), stamp: make([]int, n),
		clear: newNodeSet(n), open: newNodeSet(n), free: newNodeSet(n)}
	add := func(pos, from, to int) {
		if from, to = max(from, s), min(to, e); from < to {
			sw.fixed[pos] = append(sw.fixed[pos], [2]int{from, to})
		}
	}
	// 1. Fixed allocations: only the nodes busy at some hour of [s, e)
	// have any.
	busy := newNodeSet(n)
	po.tree.busyOver(s, e, busy)
	for pos := busy.next(0); pos >= 0; pos = busy.next(pos + 1) {
		for a := range ix.nodes[po.nodes[pos]].allocs.all() {
			if a.start >= e {
				break
			}
			if a.mask != 0 && !skip[a.block] {
				add(pos, a.start, a.end)
			}
		}
	}
	// 2. The extra allocations, which must not meet a fixed one: an
	// extension's new hours on a node that a block fixed in place holds
	// then (fractional, locked, active) cannot be made room for.
	for _, x := range extra {
		for ni, as := range x {
			if ix.nodes[ni].pool != po.p {
				continue
			}
			pos := ix.occ.pos[ni]
			for _, a := range as {
				for _, f := range sw.fixed[pos] {
					if f[0] < a.end && a.start < f[1] {
						return nil
					}
				}
			}
			for _, a := range as {
				add(pos, a.start, a.end)
			}
		}
	}
	// 3. Each healthy node's state at s.
	for _, pos := range ix.unhealthyIn(po) {
		sw.state[pos] = sweepHeld // set apart from the loop below
	}
	for pos := range n {
		if sw.state[pos] == sweepHeld {
			sw.state[pos] = sweepOut
			continue
		}
		sw.fixed[pos] = mergeSpans(sw.fixed[pos])
		sw.evaluate(pos, s)
	}
	return sw
}

// mergeSpans sorts hour ranges and merges those that overlap or touch.
func mergeSpans(spans [][2]int) [][2]int {
	if len(spans) < 2 {
		return spans
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	out := spans[:1]
	for _, sp := range spans[1:] {
		if last := &out[len(out)-1]; sp[0] <= last[1] {
			last[1] = max(last[1], sp[1])
		} else {
			out = append(out, sp)
		}
	}
	return out
}

// evaluate sets the state of the node at pos at hour t.
func (sw *repackSweep) evaluate(pos, t int) {
	f := sw.fixed[pos]
	for sw.k[pos] < len(f) && f[sw.k[pos]][1] <= t {
		sw.k[pos]++
	}
	switch k := sw.k[pos]; {
	case sw.release[pos] > t:
		sw.hold(pos, sw.release[pos])
	case k == len(f):
		sw.state[pos] = sweepClear
		sw.clear.add(pos)
		sw.nClear++
	case f[k][0] <= t:
		sw.hold(pos, f[k][1])
	default:
		sw.state[pos] = sweepOpen
		sw.open.add(pos)
		sw.nOpen++
		sw.next[pos] = f[k][0]
		heap.Push(&sw.opens, hourAt{f[k][0], pos})
	}
}

func (sw *repackSweep) hold(pos, until int) {
	sw.state[pos] = sweepHeld
	sw.wake[pos] = until
	heap.Push(&sw.waits, hourAt{until, pos})
}

// leave takes the node at pos out of its state, clear or open.
func (sw *repackSweep) leave(pos int) {
	switch sw.state[pos] {
	case sweepClear:
		sw.clear.remove(pos)
		sw.nClear--
	case sweepOpen:
		sw.open.remove(pos)
		sw.nOpen--
	}
}

// advance brings every node's state to hour t. Heap entries are not
// removed when a node's state changes; an entry that no longer matches
// the node's state is dropped when it comes up.
func (sw *repackSweep) advance(t int) {
	for len(sw.waits) > 0 && sw.waits[0].h <= t {
		x := heap.Pop(&sw.waits).(hourAt)
		if sw.state[x.pos] == sweepHeld && sw.wake[x.pos] == x.h {
			sw.evaluate(x.pos, t)
		}
	}
	for len(sw.opens) > 0 && sw.opens[0].h <= t {
		x := heap.Pop(&sw.opens).(hourAt)
		if sw.state[x.pos] == sweepOpen && sw.next[x.pos] == x.h {
			sw.leave(x.pos)
			sw.evaluate(x.pos, t)
		}
	}
}

// setClaims records which nodes the chain's items hold now.
func (sw *repackSweep) setClaims(items []repackItem) {
	n := len(sw.po.nodes)
	sw.items, sw.head, sw.claimAt = items, make([]int, n), make([]int, n)
	for pos := range n {
		sw.head[pos], sw.claimAt[pos] = -1, noClaim
	}
	for i := len(items) - 1; i >= 0; i-- {
		for _, ni := range items[i].current {
			if sw.ix.nodes[ni].pool == sw.po.p {
				pos := sw.ix.occ.pos[ni]
				sw.holds = append(sw.holds, hold{item: i, next: sw.head[pos]})
				sw.head[pos], sw.claimAt[pos] = len(sw.holds)-1, items[i].s
			}
		}
	}
}

// pass drops the claims of item i and those before it on its nodes:
// the next item holding each becomes its claim.
func (sw *repackSweep) pass(i int) {
	for _, ni := range sw.items[i].current {
		if sw.ix.nodes[ni].pool != sw.po.p {
			continue
		}
		pos := sw.ix.occ.pos[ni]
		k := sw.head[pos]
		for k >= 0 && sw.holds[k].item <= i {
			k = sw.holds[k].next
		}
		sw.head[pos], sw.claimAt[pos] = k, noClaim
		if k >= 0 {
			sw.claimAt[pos] = sw.items[sw.holds[k].item].s
		}
	}
}

// assign chooses nodes for the i-th item of the chain, as the re-pack
// does, or reports false when too few nodes are free. The item gets, in
// this order of preference:
//  1. its current nodes that are free for its window;
//  2. free nodes that no later item holds in an overlapping window, on
//     the fewest racks (pickFree);
//  3. free nodes that later items hold then, those whose item starts
//     latest first.
//
// Any free nodes keep the hour-by-hour bound (see repack); the order
// keeps the moves few. A node taken from a later item moves that item,
// which takes another's node only when 1 and 2 run short for it in turn.
func (sw *repackSweep) assign(i int) ([]int, bool) {
	it := sw.items[i]
	sw.advance(it.s)
	sw.pass(i)
	// 1. The open nodes held by something fixed before it.e: the heap's
	// entries below it.e, found from its root down (an entry's children
	// are no smaller than it).
	sw.item++
	closed := 0
	sw.walk = append(sw.walk[:0], 0)
	for len(sw.walk) > 0 {
		j := sw.walk[len(sw.walk)-1]
		sw.walk = sw.walk[:len(sw.walk)-1]
		if j >= len(sw.opens) || sw.opens[j].h >= it.e {
			continue
		}
		sw.walk = append(sw.walk, 2*j+1, 2*j+2)
		if x := sw.opens[j]; sw.state[x.pos] == sweepOpen && sw.next[x.pos] == x.h && sw.stamp[x.pos] != sw.item {
			sw.stamp[x.pos] = sw.item
			closed++
		}
	}
	if sw.nClear+sw.nOpen-closed < it.count {
		return nil, false
	}
	// 2. The free nodes.
	copy(sw.free, sw.clear)
	if sw.nOpen > 0 {
		orInto(sw.free, sw.open)
		for pos := sw.open.next(0); pos >= 0; pos = sw.open.next(pos + 1) {
			if sw.stamp[pos] == sw.item {
				sw.free.remove(pos)
			}
		}
	}
	// 3. Its own, as many as are free: all of them, most often.
	own := 0
	for _, ni := range it.current {
		if sw.ix.nodes[ni].pool == sw.po.p && sw.free.has(sw.ix.occ.pos[ni]) {
			own++
		}
	}
	nodes := it.current
	if own < len(it.current) || own != it.count {
		nodes = make([]int, 0, it.count)
		for _, ni := range it.current {
			if pos := sw.ix.occ.pos[ni]; sw.ix.nodes[ni].pool == sw.po.p && sw.free.has(pos) && len(nodes) < it.count {
				nodes = append(nodes, ni)
				sw.free.remove(pos)
			}
		}
	}
	// 4. The rest from the unclaimed free nodes, then the claimed ones.
	if need := it.count - len(nodes); need > 0 {
		sw.claimedFreeBefore(it.e)
		if n := sw.free.count(); n < need {
			need = n
		}
		nodes = append(nodes, sw.ix.pickFree(sw.po, sw.free, need)...)
		if need := it.count - len(nodes); need > 0 {
			slices.SortFunc(sw.claimedFree, func(a, b int) int {
				if sw.claimAt[a] != sw.claimAt[b] {
					return sw.claimAt[b] - sw.claimAt[a]
				}
				return a - b
			})
			for _, pos := range sw.claimedFree[:need] {
				nodes = append(nodes, sw.po.nodes[pos])
			}
		}
	}
	// 5. Hold them until it.e.
	for _, ni := range nodes {
		pos := sw.ix.occ.pos[ni]
		sw.leave(pos)
		sw.release[pos] = max(sw.release[pos], it.e)
		sw.hold(pos, sw.release[pos])
	}
	return nodes, true
}

// claimedFreeBefore moves the free nodes that a later item claims
// before hour e out of free and into claimedFree. The free nodes are
// few where a re-pack is needed: it reads them, not the claims.
func (sw *repackSweep) claimedFreeBefore(e int) {
	sw.claimedFree = sw.claimedFree[:0]
	for pos := sw.free.next(0); pos >= 0; pos = sw.free.next(pos + 1) {
		if sw.claimAt[pos] < e {
			sw.free.remove(pos)
			sw.claimedFree = append(sw.claimedFree, pos)
		}
	}
}

// hourAt is a node's position keyed by an hour, in an hourHeap.
type hourAt struct{ h, pos int }

// hourHeap is a min-heap of hourAt by hour (container/heap).
type hourHeap []hourAt

func (h hourHeap) Len() int           { return len(h) }
func (h hourHeap) Less(i, j int) bool { return h[i].h < h[j].h }
func (h hourHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hourHeap) Push(x any)        { *h = append(*h, x.(hourAt)) }
func (h *hourHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sameNodes reports whether a and b hold the same nodes.
func sameNodes(a, b []int) bool {
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
