package core

import (
	"fmt"
	"iter"
	"math/bits"
	"sort"
	"time"
)

// Index is the availability index: which GPUs of which nodes are booked in
// which hours. Hours are counted from Origin, an hour boundary; times
// before Origin count as Origin.
//
// Per pool (nodes of one GPU model, zone and GPU count) it keeps two
// hour-by-hour summaries so that search never walks nodes for whole-node
// types: busy, the nodes with any GPU booked (or unhealthy), and used, the
// GPUs booked. Per node it keeps the node's allocations.
//
// It holds committed blocks (Add, Remove) and decisions in flight
// (Assume, Confirm, Forget; see assume.go): a decision is taken as
// assumed under the service's lock, its commit runs without the lock, and
// it is then confirmed or forgotten.
//
// Concurrency: an Index is a plain in-memory structure, not safe for
// concurrent use. The service guards it with its own RWMutex: pure reads
// (Search, SearchPlans, Availability, Held, Block, Blocks, BlocksOn, Node,
// Due, NextDue) may share a read lock; every other method, Place, PlaceExtension and
// ExtensionOffer included (they grow the summaries and use scratch
// space), needs the write lock. A decision's commit needs no lock at all: between Assume
// and Confirm or Forget the index already counts it.
type Index struct {
	Fleet  *Fleet
	Origin time.Time
	// Spread, when set, returns a number in [0, n) to choose among equally
	// good nodes; nil chooses the first by name, deterministically.
	Spread func(n int) int

	nodes   []nodeState
	nodeIdx map[string]int
	pools   []*pool
	// blocks are the live blocks, the version assumed for a block in
	// flight; flights are the blocks in flight, decisions the decisions
	// in flight by key.
	blocks    map[string]*Block
	flights   map[string]*flight
	decisions map[string]*decision
	// held counts what each team holds, for Held.
	held map[string]*holdings
	// due orders the live blocks by their next lifecycle step (due.go).
	due dueQueue
	// occ is what placement reads instead of walking a pool's nodes,
	// built at the first placement (occupancy.go).
	occ *occupancy
	// changes counts what changed the index: blocks in and out, node
	// health (see Changes).
	changes uint64

	// rackNames names the racks (zone/rack).
	rackNames []string
}

type nodeState struct {
	node   Node
	pool   *pool
	rack   int       // index into Index.rackNames
	allocs allocList // by start (allocs.go)
}

type alloc struct {
	// block is the id of the block holding the GPUs, or keptBy(id) for
	// what the previous version of a block in flight holds and its
	// assumed version does not (see assume.go).
	block      string
	mask       uint64
	start, end int // hours from Origin, [start, end)
}

type pool struct {
	model string
	zone  string
	gpus  int // per node
	nodes []int
	busy  []int32
	used  []int32
	// unhealthy counts the pool's unhealthy nodes, busy at every hour.
	unhealthy int32
}

// NewIndex builds an index of the fleet with the given live blocks, with
// hour 0 at now truncated to the hour.
func NewIndex(f *Fleet, blocks []Block, now time.Time) (*Index, error) {
	ix := &Index{Fleet: f, Origin: now.UTC().Truncate(time.Hour), nodeIdx: make(map[string]int, len(f.Nodes)), blocks: make(map[string]*Block, len(blocks)),
		flights: map[string]*flight{}, decisions: map[string]*decision{}, held: map[string]*holdings{},
		due: newDueQueue(len(blocks))}
	poolOf := map[string]*pool{}
	rackOf := map[string]int{}
	for i, n := range f.Nodes {
		if n.GPUs < 1 || n.GPUs > 64 {
			return nil, fmt.Errorf("node %s: %d GPUs, want 1 to 64", n.Name, n.GPUs)
		}
		if _, dup := ix.nodeIdx[n.Name]; dup {
			return nil, fmt.Errorf("node %s declared twice", n.Name)
		}
		key := fmt.Sprintf("%s/%s/%d", n.GPUModel, n.Zone, n.GPUs)
		p := poolOf[key]
		if p == nil {
			p = &pool{model: n.GPUModel, zone: n.Zone, gpus: n.GPUs}
			poolOf[key] = p
			ix.pools = append(ix.pools, p)
		}
		p.nodes = append(p.nodes, i)
		ix.nodeIdx[n.Name] = i
		rk := n.Zone + "/" + n.Rack
		r, ok := rackOf[rk]
		if !ok {
			r = len(ix.rackNames)
			rackOf[rk] = r
			ix.rackNames = append(ix.rackNames, rk)
		}
		ix.nodes = append(ix.nodes, nodeState{node: n, pool: p, rack: r})
	}
	for _, p := range ix.pools {
		sort.Slice(p.nodes, func(i, j int) bool { return ix.nodes[p.nodes[i]].node.Name < ix.nodes[p.nodes[j]].node.Name })
	}
	sort.Slice(ix.pools, func(i, j int) bool {
		a, b := ix.pools[i], ix.pools[j]
		if a.model != b.model {
			return a.model < b.model
		}
		if a.zone != b.zone {
			return a.zone < b.zone
		}
		return a.gpus < b.gpus
	})
	ix.grow(ix.hourOf(now.Add(f.Limits.Horizon)))
	for i := range ix.nodes {
		if ix.nodes[i].node.Health == Unhealthy {
			ix.markBusy(i, 0, len(ix.nodes[i].pool.busy), +1)
			ix.nodes[i].pool.unhealthy++
		}
	}
	for _, b := range blocks {
		if err := ix.Add(b); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// hourOf returns the hour index of t, 0 for times before Origin.
func (ix *Index) hourOf(t time.Time) int {
	if !t.After(ix.Origin) {
		return 0
	}
	d := t.Sub(ix.Origin)
	h := int(d / time.Hour)
	if d%time.Hour != 0 {
		h++ // a partial hour counts as booked
	}
	return h
}

// timeOf returns the start of hour h.
func (ix *Index) timeOf(h int) time.Time { return ix.Origin.Add(time.Duration(h) * time.Hour) }

// grow extends every pool's summaries to at least n hours.
func (ix *Index) grow(n int) {
	for _, p := range ix.pools {
		if len(p.busy) >= n {
			continue
		}
		for range n - len(p.busy) {
			p.busy = append(p.busy, p.unhealthy)
			p.used = append(p.used, 0)
		}
	}
}

// Block returns an indexed block: while a decision that changes it is in
// flight, the version assumed (see Assumed).
func (ix *Index) Block(id string) (*Block, bool) {
	b, ok := ix.blocks[id]
	return b, ok
}

// Blocks returns the indexed blocks (live ones), in no particular order;
// a block in flight appears as assumed, and one whose assumed version is
// no longer live not at all. A caller that commits changes of its own to
// the blocks it reads here (the reconciler) skips those that are Assumed:
// they may never be committed.
func (ix *Index) Blocks() []*Block {
	out := make([]*Block, 0, len(ix.blocks))
	for _, b := range ix.blocks {
		out = append(out, b)
	}
	return out
}

// Add indexes a committed block's placements. Adding a block already
// indexed replaces it. Non-live blocks are removed instead. Add is all or
// nothing: a block it refuses (an unknown node, a GPU the node does not
// have, a GPU placed twice) leaves the index as it was, the block's
// previous version included.
//
// Add does not refuse a block whose GPUs another block holds: the index
// follows committed state, which may arrive in any order (a purchase's
// new block before the blocks it moved out of its way). A committed
// version wins over an assumed one: the block leaves its decision in
// flight, which Confirm or Forget then no longer changes.
func (ix *Index) Add(b Block) error {
	if !b.State.Live() {
		ix.Remove(b.ID)
		return nil
	}
	// 1. Check everything before changing anything.
	fp, err := ix.footprintOf(b)
	if err != nil {
		return err
	}
	// 2. Replace.
	ix.grow(fp.e)
	ix.detach(b.ID)
	ix.uninstall(b.ID)
	ix.install(b, fp, nil)
	return nil
}

// Remove drops a block from the index; unknown ids are ignored. A block in
// flight leaves its decision, as for Add.
func (ix *Index) Remove(id string) {
	ix.detach(id)
	ix.uninstall(id)
}

func (ix *Index) insertAlloc(ni int, a alloc) {
	ix.applyAlloc(ni, a, +1)
	ix.nodes[ni].allocs.insert(a)
}

// removeAllocs removes the allocations of block on node ni, all within
// hours [s, e), one at a time: two of them may overlap (a node in two
// placements of a block), and each must give back only the hours that
// nothing left on the node covers.
func (ix *Index) removeAllocs(ni int, block string, s, e int) {
	ns := &ix.nodes[ni]
	var found []alloc
	for a := range ns.allocs.window(s, e) {
		if a.block == block {
			found = append(found, a)
		}
	}
	for _, a := range found {
		ns.allocs.remove(a)
		ix.applyAlloc(ni, a, -1)
	}
}

// applyAlloc updates the pool summaries for adding (+1) or removing (-1)
// an allocation that is not (or no longer) in the node's list.
func (ix *Index) applyAlloc(ni int, a alloc, sign int32) {
	ns := &ix.nodes[ni]
	p := ns.pool
	n := int32(bits.OnesCount64(a.mask))
	for h := a.start; h < a.end; h++ {
		p.used[h] += sign * n
	}
	if ns.node.Health == Unhealthy {
		return // already counted busy at every hour
	}
	// The node's busy state changes only where no other allocation covers.
	for _, r := range uncovered(ns.allocs.window(a.start, a.end), a.start, a.end) {
		for h := r[0]; h < r[1]; h++ {
			p.busy[h] += sign
		}
	}
}

// uncovered returns the sub-ranges of [s, e) covered by none of allocs,
// which come in order of start.
func uncovered(allocs iter.Seq[alloc], s, e int) [][2]int {
	var out [][2]int
	cur := s
	for a := range allocs {
		if a.end <= cur || a.start >= e {
			continue
		}
		if a.start > cur {
			out = append(out, [2]int{cur, a.start})
		}
		cur = max(cur, a.end)
		if cur >= e {
			break
		}
	}
	if cur < e {
		out = append(out, [2]int{cur, e})
	}
	return out
}

func (ix *Index) markBusy(ni, s, e int, sign int32) {
	p := ix.nodes[ni].pool
	for _, r := range uncovered(ix.nodes[ni].allocs.window(s, e), s, e) {
		for h := r[0]; h < r[1]; h++ {
			p.busy[h] += sign
		}
	}
}

// SetHealth records a node's health. An unhealthy node counts as busy at
// every hour, so nothing new is placed on it.
func (ix *Index) SetHealth(name string, h Health) error {
	ni, ok := ix.nodeIdx[name]
	if !ok {
		return fmt.Errorf("%w: node %s", ErrNotFound, name)
	}
	ns := &ix.nodes[ni]
	if ns.node.Health == h {
		return nil
	}
	ix.changes++
	sign := int32(+1)
	if h == Healthy {
		sign = -1
	}
	ix.markBusy(ni, 0, len(ns.pool.busy), sign)
	ns.pool.unhealthy += sign
	ns.node.Health = h
	return nil
}

// Node returns the node with the given name as indexed (with its health).
func (ix *Index) Node(name string) (Node, bool) {
	ni, ok := ix.nodeIdx[name]
	if !ok {
		return Node{}, false
	}
	return ix.nodes[ni].node, true
}

// freeMask returns the GPUs of node ni free over [s, e), ignoring the
// allocations of the blocks in skip.
func (ix *Index) freeMask(ni, s, e int, skip map[string]bool) uint64 {
	ns := &ix.nodes[ni]
	if ns.node.Health == Unhealthy {
		return 0
	}
	all := uint64(1)<<ns.node.GPUs - 1
	if ns.node.GPUs == 64 {
		all = ^uint64(0)
	}
	var used uint64
	for a := range ns.allocs.all() {
		if a.start >= e {
			break
		}
		if a.end > s && !skip[a.block] {
			used |= a.mask
		}
	}
	return all &^ used
}

// Changes counts the changes of the index so far: every block indexed or
// dropped, every decision assumed, confirmed or forgotten, every node's
// health set. An index built apart from the store (a rebase) may replace
// this one only if it did not change since the store was read.
func (ix *Index) Changes() uint64 { return ix.changes }

// Warm builds now what the index otherwise builds at its first
// placement, so that an index made apart pays for it before it serves.
func (ix *Index) Warm() { ix.occupancy() }
