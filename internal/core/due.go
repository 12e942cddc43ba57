package core

import (
	"slices"
	"time"
)

// The index keeps its live blocks ordered by when their next lifecycle
// step is due, so that the reconciler reads the blocks with a step due
// (Due) and when the next one comes (NextDue) without walking every
// block: its cost follows the steps due, not the blocks stored.
//
// The order is kept where every version of a block enters and leaves the
// index, committed or assumed (install and uninstall): a block in flight
// is ordered by its assumed version, as Block and Blocks show it.

// Due returns the indexed blocks with a lifecycle step due at now (those
// that Advance would step), earliest due first, then by id. A block in
// flight is there as assumed; a caller that commits steps of its own (the
// reconciler) skips those that are Assumed. The cost is that of the
// blocks returned, not of the blocks indexed.
func (ix *Index) Due(now time.Time) []*Block {
	ids := ix.due.dueBy(now)
	out := make([]*Block, len(ids))
	for i, id := range ids {
		out[i] = ix.blocks[id]
	}
	return out
}

// NextDue returns when the earliest lifecycle step of an indexed block is
// due (possibly already past, for a block in flight), and false when no
// block has one.
func (ix *Index) NextDue() (time.Time, bool) { return ix.due.first() }

// stepDue returns when step would first move b, under l: the earliest
// time whose due step it takes, and false for a block that takes none
// (not live). It mirrors step's cases; a test holds them together.
func stepDue(b Block, l Limits) (time.Time, bool) {
	switch b.State {
	case StatePaymentPending:
		return b.Start.Add(-l.ApprovalDeadline), true
	case StateScheduled:
		return b.Start, true
	case StateActive:
		at := b.End
		if !b.Warned {
			at = earlier(at, b.End.Add(-l.WarnBefore))
		}
		if !b.Terminating {
			at = earlier(at, b.End.Add(-l.TerminateBefore))
		}
		return at, true
	}
	return time.Time{}, false
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// queueDue orders an indexed block by its next step; install calls it for
// every block it counts.
func (ix *Index) queueDue(b *Block) {
	if at, ok := stepDue(*b, ix.Fleet.Limits); ok {
		ix.due.set(b.ID, at)
	} else {
		ix.due.remove(b.ID)
	}
}

// dueQueue is a binary min-heap of (due time, block id). Each entry
// keeps its own position in the heap, and the ids lead to their entries,
// so that a block is ordered, moved or removed in O(log n) with one map
// access, and the blocks due are found in the time of those returned.
type dueQueue struct {
	items []*dueEntry
	byID  map[string]*dueEntry
}

type dueEntry struct {
	at  time.Time
	id  string
	pos int // index in items
}

func newDueQueue(n int) dueQueue {
	return dueQueue{items: make([]*dueEntry, 0, n), byID: make(map[string]*dueEntry, n)}
}

// set orders id at at, whether it was queued before or not.
func (q *dueQueue) set(id string, at time.Time) {
	if e, ok := q.byID[id]; ok {
		e.at = at
		if !q.up(e.pos) {
			q.down(e.pos)
		}
		return
	}
	e := &dueEntry{at: at, id: id, pos: len(q.items)}
	q.items = append(q.items, e)
	q.byID[id] = e
	q.up(e.pos)
}

// remove takes id out of the queue; an id not queued is ignored.
func (q *dueQueue) remove(id string) {
	e, ok := q.byID[id]
	if !ok {
		return
	}
	i, last := e.pos, len(q.items)-1
	q.swap(i, last)
	q.items[last] = nil
	q.items = q.items[:last]
	delete(q.byID, id)
	if i < last && !q.up(i) {
		q.down(i)
	}
}

func (q *dueQueue) first() (time.Time, bool) {
	if len(q.items) == 0 {
		return time.Time{}, false
	}
	return q.items[0].at, true
}

// dueBy returns the ids due at or before now, earliest first, then by id.
// It walks only the heap's entries that are due and their children: an
// entry not due has no descendant due.
func (q *dueQueue) dueBy(now time.Time) []string {
	var found []*dueEntry
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(q.items) || q.items[i].at.After(now) {
			continue
		}
		found = append(found, q.items[i])
		stack = append(stack, 2*i+1, 2*i+2)
	}
	slices.SortFunc(found, func(a, b *dueEntry) int {
		if dueLess(a, b) {
			return -1
		}
		if dueLess(b, a) {
			return 1
		}
		return 0
	})
	ids := make([]string, len(found))
	for i, e := range found {
		ids[i] = e.id
	}
	return ids
}

func dueLess(a, b *dueEntry) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.id < b.id
}

func (q *dueQueue) less(i, j int) bool { return dueLess(q.items[i], q.items[j]) }

func (q *dueQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].pos, q.items[j].pos = i, j
}

// up moves entry i towards the root while it is earlier than its parent;
// it reports whether it moved.
func (q *dueQueue) up(i int) bool {
	moved := false
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.swap(i, parent)
		i, moved = parent, true
	}
	return moved
}

// down moves entry i towards the leaves while a child is earlier.
func (q *dueQueue) down(i int) {
	n := len(q.items)
	for {
		least := i
		if l := 2*i + 1; l < n && q.less(l, least) {
			least = l
		}
		if r := 2*i + 2; r < n && q.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		q.swap(i, least)
		i = least
	}
}
