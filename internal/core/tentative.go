package core

import (
	"slices"
	"sort"
	"time"
)

// tentEntry is where a block that may be tentative is listed: its pool's
// occupancy and its hours.
type tentEntry struct {
	po   *poolOcc
	s, e int
}

// list lists b among its pool's blocks that may be tentative: live and
// not active, whole-node (one placement per instance, each taking every
// GPU of a node of the pool), holding at least one hour. Whether it is
// still movable at a given time (before its lock-in point) is for the
// reader to check. With crossing false, the crossings are left for
// countCrossings.
func (occ *occupancy) list(ix *Index, b *Block, crossing bool) {
	if !ix.wholeNode(b) {
		return
	}
	ni := ix.nodeIdx[b.Placements[0].Node]
	s, e := ix.hourOf(b.Start), ix.hourOf(b.End)
	if e <= s {
		return // it holds no hour, so it is in no one's way
	}
	po := occ.pools[ix.nodes[ni].pool]
	if len(po.starts) <= s {
		po.starts = append(po.starts, make([][]string, s+1-len(po.starts))...)
	}
	po.starts[s] = append(po.starts[s], b.ID)
	occ.tentative[b.ID] = tentEntry{po: po, s: s, e: e}
	if len(po.cross) < e {
		po.cross = append(po.cross, make([]int32, e-len(po.cross))...)
	}
	if crossing {
		for h := s + 1; h < e; h++ {
			po.cross[h]++
		}
	}
}

// countCrossings counts every pool's crossings from the listed blocks,
// once for all, as differences summed over the hours.
func (occ *occupancy) countCrossings() {
	for _, t := range occ.tentative {
		if t.s+1 < t.e {
			t.po.cross[t.s+1]++
			if t.e < len(t.po.cross) {
				t.po.cross[t.e]--
			}
		}
	}
	for _, po := range occ.pools {
		for h := 1; h < len(po.cross); h++ {
			po.cross[h] += po.cross[h-1]
		}
	}
}

// wholeNode reports whether b is a whole-node block that may be
// tentative: live and not active, one placement per instance, each
// taking every GPU of a node of the pool of the first. A fractional
// block whose GPUs happen to fill a node (8 of 1 GPU, or 9 over a whole
// node and one GPU of another) is not: a re-pack would move it to Count
// whole nodes.
func (ix *Index) wholeNode(b *Block) bool {
	if !b.State.Live() || b.State == StateActive || len(b.Placements) == 0 || len(b.Placements) != b.Count {
		return false
	}
	ni, ok := ix.nodeIdx[b.Placements[0].Node]
	if !ok {
		return false
	}
	p := ix.nodes[ni].pool
	for _, pl := range b.Placements {
		n, ok := ix.nodeIdx[pl.Node]
		if !ok || ix.nodes[n].pool != p || len(pl.GPUs) != p.gpus {
			return false
		}
	}
	return true
}

// unlist undoes list.
func (occ *occupancy) unlist(id string) {
	t, ok := occ.tentative[id]
	if !ok {
		return
	}
	delete(occ.tentative, id)
	ids := t.po.starts[t.s]
	if i := slices.Index(ids, id); i >= 0 {
		ids[i] = ids[len(ids)-1]
		t.po.starts[t.s] = ids[:len(ids)-1]
	}
	for h := t.s + 1; h < t.e; h++ {
		t.po.cross[h]--
	}
}

// chainOf returns the pool's tentative blocks (movable at now) whose
// windows chain to item's by overlap, as re-pack items, with item among
// them, in start order: at the same start the longer first, then by id,
// item after the blocks it ties with. The others hold none of the hours
// that the chain spans, so they cannot be in its way.
//
// It reads only the blocks listed from a start hour that no chain
// crosses, at or before the chain's first: an hour that no listed block
// holds together with the hour before (cross is zero), or else the first
// hour at which a block may still be movable.
func (ix *Index) chainOf(po *poolOcc, item repackItem, now time.Time) []repackItem {
	// 1. Where to start reading. Hours are checked from item.s-1 down,
	// not from item.s: a block being extended (PlaceExtension) is listed
	// with the end it has in the index, which is item.s.
	first := ix.hourOf(now.Add(ix.Fleet.Limits.LockIn))
	from := item.s - 1
	for from > first && from < len(po.cross) && po.cross[from] != 0 {
		from--
	}
	from = max(from, 0)
	// 2. Read hour by hour, chain by chain, until the one with item ends.
	var chain, hour []repackItem
	end, found := -1, false
	for h := from; !(found && h >= end) && (h < len(po.starts) || h <= item.s); h++ {
		hour = hour[:0]
		if h < len(po.starts) {
			for _, id := range po.starts[h] {
				if b := ix.blocks[id]; b != nil && b.Movable(now, ix.Fleet.Limits) {
					hour = append(hour, ix.repackItemOf(b))
				}
			}
		}
		sort.Slice(hour, func(i, j int) bool {
			if hour[i].e != hour[j].e {
				return hour[i].e > hour[j].e
			}
			return hour[i].id < hour[j].id
		})
		if h == item.s { // after the blocks at least as long
			at := sort.Search(len(hour), func(i int) bool { return hour[i].e < item.e })
			hour = slices.Insert(hour, at, item)
		}
		for _, x := range hour {
			if x.s >= end && len(chain) > 0 { // a gap: a new chain starts
				if found {
					return chain
				}
				chain = chain[:0]
			}
			chain = append(chain, x)
			end = max(end, x.e)
			found = found || x.id == item.id
		}
	}
	return chain
}

// repackItemOf is a tentative block as a re-pack item.
func (ix *Index) repackItemOf(b *Block) repackItem {
	it := repackItem{id: b.ID, count: b.Count, s: ix.hourOf(b.Start), e: ix.hourOf(b.End)}
	for _, pl := range b.Placements {
		it.current = append(it.current, ix.nodeIdx[pl.Node])
	}
	return it
}
