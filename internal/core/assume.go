package core

import (
	"fmt"
	"strings"
	"time"
)

// A decision in flight (Kueue's AssumeWorkload / ForgetWorkload): the
// service decides under its lock (Place, PlaceExtension,
// PlaceReplacement, a lifecycle step), takes the decision as assumed,
// releases the lock and commits; then, under the lock again, it confirms
// the decision when the commit succeeded and forgets it when it failed.
//
// While a decision is in flight the index counts, for each of its blocks,
// the GPUs and hours of the assumed version and also those of the
// previous version that the assumed one gives up (kept allocations). So
// a search or another decision sees both as taken, nothing is placed on
// capacity that a failed commit would need back, and Forget restores the
// index exactly, whatever else was assumed, confirmed or forgotten in the
// meantime. Confirm gives up the kept capacity. Capacity that a decision
// frees is therefore free to others only once it is committed.

// Assume takes a decision as assumed until Confirm(b.ID) or
// Forget(b.ID): b, a new block or a new version of an indexed one, and
// moves, the other blocks the decision changes (the tentative blocks a
// placement re-packed). It is AssumeAs(b.ID, b, moves...), except that it
// refuses a decision keyed b.ID already in flight.
func (ix *Index) Assume(b Block, moves ...Block) error {
	if _, ok := ix.decisions[b.ID]; ok {
		return fmt.Errorf("%w: block %s is changed by a decision not yet committed", ErrConflict, b.ID)
	}
	return ix.AssumeAs(b.ID, append([]Block{b}, moves...)...)
}

// AssumeAs indexes the blocks of a decision as taken, until the commit
// that stores them ends: Confirm(key) when it succeeded, Forget(key) when
// it failed. Each block is a new block, or a new version of an indexed
// block (an extension, a move, a replacement, a cancellation: a version
// that is not live assumes the block's removal). Until then a search, a
// placement or a quota check sees both what the blocks hold as assumed
// and what their previous versions held.
//
// AssumeAs is all or nothing. It refuses, changing nothing:
//   - a block that Add would refuse (an unknown node, a GPU the node does
//     not have, a GPU placed twice), without an id, or twice in the call;
//   - a block already in another decision in flight (ErrConflict: one
//     decision at a time changes a block);
//   - GPUs taken, at some hour, by a block outside the decision or by
//     another block of it (ErrConflict). What the decision's own blocks
//     held before is free to it: a new block may take the GPUs of a
//     block it moves.
//
// Health is not checked: deciding where to place is the placement's job.
//
// Assuming again under a key in flight adds to that decision: a block
// already in it is decided anew (Forget still restores the version from
// before the decision), so a training plan can place its segments one
// after another, each seeing the ones before it and moving them. Callers
// use a key of their own per decision (a new block's id, a plan's id, a
// new id): two callers sharing a key would share one decision.
//
// The blocks are indexed as given, Version included; the commit's
// versions are the store's business (the service may Add the stored
// blocks after Confirm).
func (ix *Index) AssumeAs(key string, blocks ...Block) error {
	// 1. Check each block on its own.
	d := ix.decisions[key]
	fps := make([]footprint, len(blocks))
	inCall := make(map[string]bool, len(blocks))
	for i, b := range blocks {
		if b.ID == "" {
			return Invalidf("a block to assume needs an id")
		}
		if inCall[b.ID] {
			return fmt.Errorf("block %s: assumed twice in one decision", b.ID)
		}
		inCall[b.ID] = true
		if f := ix.flights[b.ID]; f != nil && f.decision != d {
			return fmt.Errorf("%w: block %s is changed by a decision not yet committed", ErrConflict, b.ID)
		}
		fp, err := ix.footprintOf(b)
		if err != nil {
			return err
		}
		fps[i] = fp
	}
	// 2. Check the blocks against what else is taken, and each other.
	for i, b := range blocks {
		if err := ix.checkFree(b, fps[i], d, inCall); err != nil {
			return err
		}
		for j := range i {
			if err := overlap(b, fps[i], blocks[j], fps[j]); err != nil {
				return err
			}
		}
	}
	// 3. Index them.
	if d == nil {
		d = &decision{key: key}
		ix.decisions[key] = d
	}
	for i, b := range blocks {
		ix.grow(fps[i].e)
		f := &flight{decision: d}
		if old := ix.flights[b.ID]; old != nil {
			f.prev = old.prev // decided anew: still restored as it was
		} else if cur, ok := ix.blocks[b.ID]; ok {
			prev := *cur
			f.prev = &prev
		}
		ix.uninstall(b.ID)
		if !containsString(d.ids, b.ID) {
			d.ids = append(d.ids, b.ID)
		}
		ix.install(b, fps[i], f)
	}
	return nil
}

// checkFree reports a conflict when the GPUs of fp are taken by a block
// other than those of the call (whose current versions it replaces) and
// what is kept for blocks of the decision d.
func (ix *Index) checkFree(b Block, fp footprint, d *decision, inCall map[string]bool) error {
	if !fp.holds() {
		return nil
	}
	for _, n := range fp.nodes {
		for a := range ix.nodes[n.node].allocs.window(fp.s, fp.e) {
			if a.end <= fp.s || a.mask&n.mask == 0 || inCall[a.block] {
				continue
			}
			owner, kept := keptOwner(a.block)
			if kept && d != nil && containsString(d.ids, owner) {
				continue
			}
			return fmt.Errorf("%w: block %s: GPUs of node %s are taken by block %s from %s to %s", ErrConflict,
				b.ID, ix.nodes[n.node].node.Name, owner,
				ix.timeOf(max(a.start, fp.s)).Format(time.RFC3339), ix.timeOf(min(a.end, fp.e)).Format(time.RFC3339))
		}
	}
	return nil
}

// overlap reports a conflict when two blocks of one decision hold a GPU at
// the same hour.
func overlap(a Block, fa footprint, b Block, fb footprint) error {
	if !fa.holds() || !fb.holds() || fa.e <= fb.s || fb.e <= fa.s {
		return nil
	}
	for _, n := range fa.nodes {
		if m, ok := fb.maskOn(n.node); ok && m&n.mask != 0 {
			return fmt.Errorf("%w: blocks %s and %s of one decision take the same GPUs", ErrConflict, a.ID, b.ID)
		}
	}
	return nil
}

// Confirm makes the blocks of the decision in flight under key normal
// indexed blocks, as assumed, after the commit that stored them; what
// their previous versions held and they do not is given up (a block
// assumed not live is removed). After Confirm the index is as if the
// blocks had been Added. It reports whether the key was in flight: not
// when the index was rebuilt since, or every block of the decision was
// Added or Removed in the meantime.
func (ix *Index) Confirm(key string) bool {
	d, ok := ix.decisions[key]
	if !ok {
		return false
	}
	delete(ix.decisions, key)
	for _, id := range d.ids {
		b := ix.flights[id].block
		ix.uninstall(id)
		if b.State.Live() {
			ix.install(b, ix.footprint(b), nil)
		}
	}
	return true
}

// Forget drops the decision in flight under key, after its commit failed:
// each of its blocks is back as it was before the decision (a new block
// is gone), and the index is as before the decision's first AssumeAs, but
// for the blocks Added or Removed since, which stay as they were left.
// It reports whether the key was in flight.
func (ix *Index) Forget(key string) bool {
	d, ok := ix.decisions[key]
	if !ok {
		return false
	}
	delete(ix.decisions, key)
	for _, id := range d.ids {
		prev := ix.flights[id].prev
		ix.uninstall(id)
		if prev != nil {
			ix.install(*prev, ix.footprint(*prev), nil)
		}
	}
	return true
}

// Assumed reports whether a block is changed by a decision in flight.
func (ix *Index) Assumed(id string) bool {
	_, ok := ix.flights[id]
	return ok
}

// keptMark ends the block name of kept allocations. Block ids are
// generated and printable, so no block id ends so.
const keptMark = "\x00kept"

// keptBy names the allocations kept for the previous version of block id
// while a decision changing it is in flight. They are not the block's
// own: a placement that skips the block (re-packing or replacing it)
// still sees them taken.
func keptBy(id string) string { return id + keptMark }

// keptOwner returns the block whose allocations these are, and whether
// they are kept ones.
func keptOwner(block string) (string, bool) { return strings.CutSuffix(block, keptMark) }

// keptAlloc is an allocation (block id not set) on a node.
type keptAlloc struct {
	node int
	a    alloc
}

// keptAllocs returns what prev holds and next does not, as kept
// allocations: on a node next does not hold, all of it; on a node both
// hold, the hours outside next's with all of prev's GPUs, and next's hours
// with the GPUs only prev holds.
func keptAllocs(prev, next footprint) []keptAlloc {
	if prev.e <= prev.s {
		return nil
	}
	var out []keptAlloc
	add := func(ni int, mask uint64, s, e int) {
		if e > s {
			out = append(out, keptAlloc{node: ni, a: alloc{mask: mask, start: s, end: e}})
		}
	}
	for _, n := range prev.nodes {
		nm, both := next.maskOn(n.node)
		if !both || !next.holds() || next.e <= prev.s || next.s >= prev.e {
			add(n.node, n.mask, prev.s, prev.e)
			continue
		}
		add(n.node, n.mask, prev.s, min(prev.e, next.s))
		if m := n.mask &^ nm; m != 0 {
			add(n.node, m, max(prev.s, next.s), min(prev.e, next.e))
		}
		add(n.node, n.mask, max(prev.s, next.e), prev.e)
	}
	return out
}

// keptHolds returns, as blocks whose Count is the instances held, what
// the team holds in prev beyond what it holds in next, hour by hour: for
// the same team and type, prev's count outside next's hours and the
// difference inside them; otherwise all of prev.
func (ix *Index) keptHolds(prev, next Block) []Block {
	ps, pe := ix.hourOf(prev.Start), ix.hourOf(prev.End)
	ns, ne := ix.hourOf(next.Start), ix.hourOf(next.End)
	piece := func(s, e, count int) Block {
		return Block{Team: prev.Team, InstanceType: prev.InstanceType, Count: count, Start: ix.timeOf(s), End: ix.timeOf(e)}
	}
	if pe <= ps {
		return nil
	}
	if !next.State.Live() || next.Team != prev.Team || next.InstanceType != prev.InstanceType || ne <= ns || ne <= ps || ns >= pe {
		return []Block{piece(ps, pe, prev.Count)}
	}
	var out []Block
	if s, e := ps, min(pe, ns); e > s {
		out = append(out, piece(s, e, prev.Count))
	}
	if s, e, c := max(ps, ns), min(pe, ne), prev.Count-next.Count; e > s && c > 0 {
		out = append(out, piece(s, e, c))
	}
	if s, e := max(ps, ne), pe; e > s {
		out = append(out, piece(s, e, prev.Count))
	}
	return out
}

func containsString(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// InFlight is the number of decisions assumed and not yet confirmed or
// forgotten: while it is not zero, capacity that they hold may yet be
// freed.
func (ix *Index) InFlight() int { return len(ix.decisions) }

// InFlightOn reports whether a decision in flight changes a block of
// GPU model gpuModel in zone (any zone when zone is "") that overlaps
// [start, end), in its new version or its old: only then may a request
// for that capacity find it free once the decision settles.
func (ix *Index) InFlightOn(gpuModel, zone string, start, end time.Time) bool {
	overlaps := func(b *Block) bool {
		return b != nil && b.GPUModel == gpuModel && (zone == "" || b.Zone == zone) && b.Start.Before(end) && start.Before(b.End)
	}
	for _, f := range ix.flights {
		if overlaps(&f.block) || overlaps(f.prev) {
			return true
		}
	}
	return false
}
