package core

import "fmt"

// flight is a block changed by a decision in flight: the decision, the
// version assumed, and the version before it (nil for a block the
// decision creates), which Forget restores. Committed blocks need none:
// the index counts them from their version in Index.blocks.
type flight struct {
	decision *decision
	block    Block
	prev     *Block
}

// decision is a decision in flight: the blocks it changes, by id, in the
// order they were first assumed.
type decision struct {
	key string
	ids []string
}

// footprint is what a live block holds: per node (its placements merged),
// the GPUs over the hours [s, e). A block that is not live holds nothing.
type footprint struct {
	s, e  int
	nodes []nodeGPUs
}

type nodeGPUs struct {
	node int
	mask uint64
}

// holds reports whether the footprint takes any hour.
func (fp footprint) holds() bool { return fp.e > fp.s && len(fp.nodes) > 0 }

// maskOn returns the GPUs held on node ni, and whether the node is held.
func (fp footprint) maskOn(ni int) (uint64, bool) {
	for _, n := range fp.nodes {
		if n.node == ni {
			return n.mask, true
		}
	}
	return 0, false
}

// footprintOf checks a block's placements against the fleet and returns
// what it holds: every node known, every GPU one the node has, none
// placed twice.
func (ix *Index) footprintOf(b Block) (footprint, error) {
	if !b.State.Live() {
		return footprint{}, nil
	}
	fp := footprint{s: ix.hourOf(b.Start), e: ix.hourOf(b.End)}
	for _, pl := range b.Placements {
		ni, ok := ix.nodeIdx[pl.Node]
		if !ok {
			return footprint{}, fmt.Errorf("block %s: unknown node %s", b.ID, pl.Node)
		}
		i := len(fp.nodes)
		for j, n := range fp.nodes {
			if n.node == ni {
				i = j
			}
		}
		if i == len(fp.nodes) {
			fp.nodes = append(fp.nodes, nodeGPUs{node: ni})
		}
		for _, g := range pl.GPUs {
			if g < 0 || g >= ix.nodes[ni].node.GPUs {
				return footprint{}, fmt.Errorf("block %s: node %s has no GPU %d", b.ID, pl.Node, g)
			}
			if fp.nodes[i].mask&(1<<g) != 0 {
				return footprint{}, fmt.Errorf("block %s: GPU %d of node %s placed twice", b.ID, g, pl.Node)
			}
			fp.nodes[i].mask |= 1 << g
		}
	}
	return fp, nil
}

// install counts a version of a block, whose footprint is fp: its
// allocations and holdings and, in flight (f not nil), what is kept of
// its previous version. The block must not be counted already.
func (ix *Index) install(b Block, fp footprint, f *flight) {
	defer ix.track(b.ID)
	ix.changes++
	if fp.e > fp.s {
		for _, n := range fp.nodes {
			ix.insertAlloc(n.node, alloc{block: b.ID, mask: n.mask, start: fp.s, end: fp.e})
		}
	}
	if b.State.Live() {
		ix.hold(&b, b.Count)
		cp := b
		ix.blocks[b.ID] = &cp
		ix.queueDue(&cp)
	}
	if f == nil {
		return
	}
	f.block = b
	ix.flights[b.ID] = f
	if f.prev == nil {
		return
	}
	for _, k := range keptAllocs(ix.footprint(*f.prev), fp) {
		k.a.block = keptBy(b.ID)
		ix.insertAlloc(k.node, k.a)
	}
	for _, h := range ix.keptHolds(*f.prev, b) {
		ix.hold(&h, h.Count)
	}
}

// uninstall undoes install: the block is no longer counted.
func (ix *Index) uninstall(id string) {
	defer ix.untrack(id, ix.heldSpans(id))
	ix.changes++
	f := ix.flights[id]
	var b Block
	switch cur, ok := ix.blocks[id]; {
	case f != nil:
		b = f.block
	case ok:
		b = *cur
	default:
		return
	}
	ix.removeAllocsOf(id, b)
	if b.State.Live() {
		ix.hold(&b, -b.Count)
	}
	if f != nil && f.prev != nil {
		ix.removeAllocsOf(keptBy(id), *f.prev)
		for _, h := range ix.keptHolds(*f.prev, b) {
			ix.hold(&h, -h.Count)
		}
	}
	delete(ix.blocks, id)
	ix.due.remove(id)
	delete(ix.flights, id)
}

// removeAllocsOf removes the allocations of block (an id, or keptBy an
// id) that version v of it counted: on v's nodes, within v's hours.
func (ix *Index) removeAllocsOf(block string, v Block) {
	fp := ix.footprint(v)
	if !fp.holds() {
		return
	}
	for _, n := range fp.nodes {
		ix.removeAllocs(n.node, block, fp.s, fp.e)
	}
}

// footprint is footprintOf for a version that was counted before, and so
// is known to be valid.
func (ix *Index) footprint(b Block) footprint {
	fp, _ := ix.footprintOf(b)
	return fp
}

// detach takes a block out of its decision in flight, if any; the
// caller then replaces or removes the block.
func (ix *Index) detach(id string) {
	f := ix.flights[id]
	if f == nil {
		return
	}
	d := f.decision
	for i, x := range d.ids {
		if x == id {
			d.ids = append(d.ids[:i], d.ids[i+1:]...)
			break
		}
	}
	if len(d.ids) == 0 {
		delete(ix.decisions, d.key)
	}
}
