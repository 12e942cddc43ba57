package core

import (
	"fmt"
	"math/bits"
	"sort"
	"time"
)

// Node-health event types.
const (
	EventBlockDegraded     = "block.degraded"
	EventBlockNodeReplaced = "block.node-replaced"
	EventBlockRecovered    = "block.recovered"
)

// BlocksOn returns the live blocks that hold GPUs of a node and have not
// ended at now, by id.
func (ix *Index) BlocksOn(node string, now time.Time) []Block {
	ni, ok := ix.nodeIdx[node]
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []Block
	for a := range ix.nodes[ni].allocs.all() {
		b := ix.blocks[a.block]
		if b == nil || seen[b.ID] || !now.Before(b.End) {
			continue
		}
		seen[b.ID] = true
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// PlaceReplacement finds GPUs for the instances that block b holds on a
// failed node: on healthy nodes of the same pool, free for the block's
// window, the failed node's rack first. It returns the block's placements
// with the failed node's replaced, or ErrNoCapacity when none is free
// (the block is then degraded). The block keeps its id and its other GPUs.
func (ix *Index) PlaceReplacement(b Block, failed string) ([]Placement, error) {
	t, ok := ix.Fleet.Type(b.InstanceType)
	if !ok || t.GPUsPerInstance < 1 {
		return nil, fmt.Errorf("block %s: unknown instance type %s", b.ID, b.InstanceType)
	}
	fi, ok := ix.nodeIdx[failed]
	if !ok {
		return nil, fmt.Errorf("%w: node %s", ErrNotFound, failed)
	}
	var lost Placement
	var kept []Placement
	for _, pl := range b.Placements {
		if pl.Node == failed {
			lost = pl
		} else {
			kept = append(kept, pl)
		}
	}
	need := len(lost.GPUs) / t.GPUsPerInstance
	if need == 0 {
		return b.Placements, nil
	}
	s, e := ix.hourOf(b.Start), ix.hourOf(b.End)
	skip := map[string]bool{b.ID: true}
	// Nodes the block already uses are not candidates (a multi-node block
	// keeps one instance per node for whole-node types anyway).
	using := map[int]bool{fi: true}
	for _, pl := range kept {
		using[ix.nodeIdx[pl.Node]] = true
	}
	type cand struct {
		ni       int
		free     uint64
		sameRack bool
	}
	var cands []cand
	for _, ni := range ix.nodes[fi].pool.nodes {
		if using[ni] {
			continue
		}
		free := ix.freeMask(ni, s, e, skip)
		if bits.OnesCount64(free) >= t.GPUsPerInstance {
			cands = append(cands, cand{ni, free, ix.nodes[ni].rack == ix.nodes[fi].rack})
		}
	}
	// Same rack first, then the fullest nodes (packing), then by name.
	sort.Slice(cands, func(i, j int) bool {
		a, c := cands[i], cands[j]
		if a.sameRack != c.sameRack {
			return a.sameRack
		}
		if x, y := bits.OnesCount64(a.free), bits.OnesCount64(c.free); x != y {
			return x < y
		}
		return ix.nodes[a.ni].node.Name < ix.nodes[c.ni].node.Name
	})
	out := kept
	for _, c := range cands {
		if need == 0 {
			break
		}
		var gpus []int
		m := c.free
		for need > 0 && bits.OnesCount64(m) >= t.GPUsPerInstance {
			for range t.GPUsPerInstance {
				g := bits.TrailingZeros64(m)
				gpus = append(gpus, g)
				m &^= 1 << g
			}
			need--
		}
		out = append(out, Placement{Node: ix.nodes[c.ni].node.Name, GPUs: gpus})
	}
	if need > 0 {
		return nil, fmt.Errorf("%w: no healthy %s capacity free in %s to replace node %s of block %s", ErrNoCapacity, b.GPUModel, b.Zone, failed, b.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}
