package core

import (
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

// repack re-assigns every tentative whole-node block of pool p, together
// with the new item, to nodes. Fixed blocks (active, locked or fractional)
// stay where they are. Items go in start order, each to nodes free of
// fixed blocks and of items already assigned; a tentative block keeps its
// nodes when they are free, so only what must move moves. extra holds
// fixed allocations not yet in the index (an extension being planned).
//
// Placing intervals in start order on whatever nodes are free uses no more
// nodes at any hour than the hour's demand (interval graphs are perfect),
// so when the hour-by-hour count fits, this never fails as long as every
// fixed block starts before every tentative one, which lock-in guarantees.
func (ix *Index) repack(p *pool, item repackItem, now time.Time, extra ...map[int][]alloc) (PlacementPlan, bool) {
	// 1. Split the pool's blocks into fixed and tentative.
	skip := map[string]bool{}
	var items []repackItem
	for _, b := range ix.tentativeIn(p, now) {
		skip[b.ID] = true
		it := repackItem{id: b.ID, count: b.Count, s: ix.hourOf(b.Start), e: ix.hourOf(b.End)}
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
	items = componentOf(items, item)
	for id := range skip {
		if !containsItem(items, id) {
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
		free := ix.freeNodes(p, it.s, it.e, skip, assigned)
		if len(free) < it.count {
			return PlacementPlan{}, false
		}
		nodes := keepCurrent(it.current, free)
		if nodes == nil {
			nodes = ix.pickNodes(free, it.count)
		}
		for _, ni := range nodes {
			assigned[ni] = append(assigned[ni], alloc{block: it.id, start: it.s, end: it.e})
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

// tentativeIn returns the movable whole-node blocks placed in pool p.
func (ix *Index) tentativeIn(p *pool, now time.Time) []*Block {
	var out []*Block
	for _, b := range ix.blocks {
		if !b.Movable(now, ix.Fleet.Limits) || len(b.Placements) == 0 {
			continue
		}
		ni, ok := ix.nodeIdx[b.Placements[0].Node]
		if !ok || ix.nodes[ni].pool != p || len(b.Placements[0].GPUs) != p.gpus {
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// keepCurrent returns current when every one of its nodes is in free.
func keepCurrent(current, free []int) []int {
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

// componentOf returns the items, sorted by start, whose windows chain by
// overlap to the window of it (included).
func componentOf(sorted []repackItem, it repackItem) []repackItem {
	var comp []repackItem
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

func containsItem(items []repackItem, id string) bool {
	for _, x := range items {
		if x.id == id {
			return true
		}
	}
	return false
}
