package core

import "fmt"

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
// allocations and holdings. The block must not be counted already.
func (ix *Index) install(b Block, fp footprint) {
	if fp.e > fp.s {
		for _, n := range fp.nodes {
			ix.insertAlloc(n.node, alloc{block: b.ID, mask: n.mask, start: fp.s, end: fp.e})
		}
	}
	ix.hold(&b, b.Count)
	cp := b
	ix.blocks[b.ID] = &cp
}

// uninstall undoes install: the block is no longer counted.
func (ix *Index) uninstall(id string) {
	cur, ok := ix.blocks[id]
	if !ok {
		return
	}
	b := *cur
	ix.removeAllocsOf(id, b.Placements)
	ix.hold(&b, -b.Count)
	delete(ix.blocks, id)
}

// removeAllocsOf removes the allocations of block from the nodes of pls.
func (ix *Index) removeAllocsOf(block string, pls []Placement) {
	for _, pl := range pls {
		if ni, ok := ix.nodeIdx[pl.Node]; ok {
			ix.removeAllocs(ni, block)
		}
	}
}
