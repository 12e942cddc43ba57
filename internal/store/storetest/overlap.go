package storetest

import (
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

func testOverlap(t *testing.T, h Harness) {
	// The stored block holds GPUs 0 and 1 of n1 over hours [0, 4).
	tests := map[string]struct {
		existing     core.BlockState
		new          core.Block
		wantConflict bool
	}{
		"same GPU, intersecting": {
			new:          makeBlock("new").on("n1", 1).hours(2, 6).obj(),
			wantConflict: true,
		},
		"same GPUs, same range": {
			new:          makeBlock("new").on("n1", 0, 1).hours(0, 4).obj(),
			wantConflict: true,
		},
		"inside": {
			new:          makeBlock("new").on("n1", 0).hours(1, 2).obj(),
			wantConflict: true,
		},
		"containing": {
			new:          makeBlock("new").on("n1", 0, 1, 2).hours(-2, 8).obj(),
			wantConflict: true,
		},
		"second placement overlaps": {
			new:          makeBlock("new").on("n2", 0, 1).on("n1", 7, 1).hours(3, 5).obj(),
			wantConflict: true,
		},
		"adjacent after": {
			new: makeBlock("new").on("n1", 0, 1).hours(4, 8).obj(),
		},
		"adjacent before": {
			new: makeBlock("new").on("n1", 0, 1).hours(-3, 0).obj(),
		},
		"other GPUs of the node": {
			new: makeBlock("new").on("n1", 2, 3, 4, 5, 6, 7).hours(0, 4).obj(),
		},
		"same GPUs of another node": {
			new: makeBlock("new").on("n2", 0, 1).hours(0, 4).obj(),
		},
		"payment-pending holds capacity": {
			existing:     core.StatePaymentPending,
			new:          makeBlock("new").on("n1", 0).obj(),
			wantConflict: true,
		},
		"active holds capacity": {
			existing:     core.StateActive,
			new:          makeBlock("new").on("n1", 0).obj(),
			wantConflict: true,
		},
		"cancelled frees capacity": {
			existing: core.StateCancelled,
			new:      makeBlock("new").on("n1", 0, 1).obj(),
		},
		"expired frees capacity": {
			existing: core.StateExpired,
			new:      makeBlock("new").on("n1", 0, 1).obj(),
		},
		"payment-failed frees capacity": {
			existing: core.StatePaymentFailed,
			new:      makeBlock("new").on("n1", 0, 1).obj(),
		},
		"failed frees capacity": {
			existing: core.StateFailed,
			new:      makeBlock("new").on("n1", 0, 1).obj(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := h.Open(t)
			state := tc.existing
			if state == "" {
				state = core.StateScheduled
			}
			old := makeBlock("old").on("n1", 0, 1).hours(0, 4).state(state).obj()
			mustCommit(t, s, insert(old))
			if tc.wantConflict {
				wantConflict(t, s, insert(tc.new))
				wantNoBlock(t, s, tc.new.ID)
			} else {
				mustCommit(t, s, insert(tc.new))
				wantBlock(t, s, withVersion(tc.new, 1))
			}
			wantBlock(t, s, withVersion(old, 1))
		})
	}
	t.Run("among several per GPU", func(t *testing.T) { testOverlapAmongSeveral(t, h) })
}

// severalPerGPU are the blocks that testOverlapAmongSeveral stores, in
// hours: on GPU 0 of n1, live [0,4) [6,8) [10,14) [20,30), and released
// [4,6) [8,10) [15,18) [30,34) that hold nothing; on GPU 1, live [8,10).
func severalPerGPU() []core.Block {
	return []core.Block{
		makeBlock("live-0").on("n1", 0).hours(0, 4).obj(),
		makeBlock("live-6").on("n1", 0).hours(6, 8).obj(),
		makeBlock("live-10").on("n1", 0).hours(10, 14).state(core.StateActive).obj(),
		makeBlock("live-20").on("n1", 0).hours(20, 30).state(core.StatePaymentPending).obj(),
		makeBlock("cancelled-4").on("n1", 0).hours(4, 6).state(core.StateCancelled).obj(),
		makeBlock("expired-8").on("n1", 0).hours(8, 10).state(core.StateExpired).obj(),
		makeBlock("cancelled-15").on("n1", 0).hours(15, 18).state(core.StateCancelled).obj(),
		makeBlock("failed-30").on("n1", 0).hours(30, 34).state(core.StatePaymentFailed).obj(),
		makeBlock("gpu1-8").on("n1", 1).hours(8, 10).obj(),
	}
}

// testOverlapAmongSeveral checks blocks against a GPU that holds several
// allocations, live and released, so that a check reading the wrong one
// of them (the last to start before the new block, the first to start
// after it, the first to end after it whether live or not) fails.
func testOverlapAmongSeveral(t *testing.T, h Harness) {
	tests := map[string]struct {
		new          core.Block
		wantConflict bool
	}{
		"starts in a gap, ends inside the next": {
			new:          makeBlock("new").on("n1", 0).hours(5, 7).obj(),
			wantConflict: true,
		},
		"starts inside one, ends in a gap": {
			new:          makeBlock("new").on("n1", 0).hours(7, 9).obj(),
			wantConflict: true,
		},
		"inside one": {
			new:          makeBlock("new").on("n1", 0).hours(11, 12).obj(),
			wantConflict: true,
		},
		"covers one from gap to gap": {
			new:          makeBlock("new").on("n1", 0).hours(5, 9).obj(),
			wantConflict: true,
		},
		"covers several": {
			new:          makeBlock("new").on("n1", 0).hours(3, 25).obj(),
			wantConflict: true,
		},
		"starts before all, ends inside the first": {
			new:          makeBlock("new").on("n1", 0).hours(-10, 1).obj(),
			wantConflict: true,
		},
		"past a released one into the next": {
			new:          makeBlock("new").on("n1", 0).hours(16, 21).obj(),
			wantConflict: true,
		},
		"fills a gap, touching both ends": {
			new: makeBlock("new").on("n1", 0).hours(4, 6).obj(),
		},
		"fills the gap of an expired one": {
			new: makeBlock("new").on("n1", 0).hours(8, 10).obj(),
		},
		"over part of a released one": {
			new: makeBlock("new").on("n1", 0).hours(14, 17).obj(),
		},
		"a whole gap holding a released one": {
			new: makeBlock("new").on("n1", 0).hours(14, 20).obj(),
		},
		"after the last live one": {
			new: makeBlock("new").on("n1", 0).hours(30, 40).obj(),
		},
		"before the first": {
			new: makeBlock("new").on("n1", 0).hours(-6, 0).obj(),
		},
		"two GPUs, the second taken": {
			new:          makeBlock("new").on("n1", 0, 1).hours(8, 10).obj(),
			wantConflict: true,
		},
		"two GPUs, both free": {
			new: makeBlock("new").on("n1", 1, 0).hours(4, 6).obj(),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := h.Open(t)
			stored := severalPerGPU()
			mustCommit(t, s, insert(stored...))
			if tc.wantConflict {
				wantConflict(t, s, insert(tc.new))
				wantNoBlock(t, s, tc.new.ID)
			} else {
				mustCommit(t, s, insert(tc.new))
				wantBlock(t, s, withVersion(tc.new, 1))
			}
			for _, b := range stored {
				wantBlock(t, s, withVersion(b, 1))
			}
		})
	}

	// Extending a live block is checked against the allocations after it.
	t.Run("extend", func(t *testing.T) {
		s := h.Open(t)
		mustCommit(t, s, insert(severalPerGPU()...))
		b := makeBlock("live-10").on("n1", 0).hours(10, 14).state(core.StateActive).obj()
		into := b
		into.End = hour(21)
		wantConflict(t, s, update(into, 1))
		wantBlock(t, s, withVersion(b, 1))
		upTo := b
		upTo.End = hour(20)
		mustCommit(t, s, update(upTo, 1))
		wantBlock(t, s, withVersion(upTo, 2))
	})
}

func testOverlapWithinChange(t *testing.T, h Harness) {
	s := h.Open(t)
	// Two blocks of one change may not share a GPU either.
	wantConflict(t, s, insert(
		makeBlock("a").on("n1", 0, 1).obj(),
		makeBlock("b").on("n1", 1, 2).obj(),
	))
	wantNoBlock(t, s, "a")
	wantNoBlock(t, s, "b")
	mustCommit(t, s, insert(
		makeBlock("a").on("n1", 0, 1).obj(),
		makeBlock("b").on("n1", 2, 3).obj(),
		makeBlock("c").on("n1", 0, 1).hours(4, 8).obj(),
	))

	// y is stored; x1 and x2 come in one change, both inside y. Each
	// new block's nearest neighbour on the GPU may be the other new one
	// (x2, after x1, without overlapping it): y must still be found.
	y := makeBlock("y").on("n2", 0).hours(0, 10).obj()
	mustCommit(t, s, insert(y))
	x1 := makeBlock("x1").on("n2", 0).hours(1, 2).obj()
	x2 := makeBlock("x2").on("n2", 0).hours(3, 4).obj()
	x3 := makeBlock("x3").on("n2", 0).hours(5, 6).obj()
	wantConflict(t, s, insert(x1, x2, x3))
	wantConflict(t, s, insert(x3, x2, x1))
	wantNoBlock(t, s, "x1")
	// Once the same change shortens y to [0, 1), they fit.
	short := y
	short.End = hour(1)
	c := update(short, 1)
	c.Insert = []core.Block{x1, x2, x3}
	mustCommit(t, s, c)
	wantBlock(t, s, withVersion(short, 2))
	wantBlock(t, s, withVersion(x2, 1))
}

func testReplace(t *testing.T, h Harness) {
	s := h.Open(t)
	a := makeBlock("a").on("n1", 0, 1, 2, 3, 4, 5, 6, 7).obj()
	mustCommit(t, s, insert(a))

	// Move a to n2: n1 becomes free, n2 taken.
	moved := a
	moved.Placements = []core.Placement{{Node: "n2", GPUs: []int{7, 6, 5, 4, 3, 2, 1, 0}}}
	mustCommit(t, s, replace(moved, 1))
	wantBlock(t, s, withVersion(moved, 2))
	mustCommit(t, s, insert(makeBlock("b").on("n1", 0).obj()))
	wantConflict(t, s, insert(makeBlock("c").on("n2", 3).hours(1, 2).obj()))

	// Moving back onto b's GPU is refused and changes nothing.
	back := moved
	back.Placements = []core.Placement{{Node: "n1", GPUs: []int{0, 1}}}
	wantConflict(t, s, replace(back, 2))
	wantBlock(t, s, withVersion(moved, 2))
	wantConflict(t, s, insert(makeBlock("c").on("n2", 3).hours(1, 2).obj()))

	// Replace with a stale version is refused.
	elsewhere := moved
	elsewhere.Placements = []core.Placement{{Node: "n3", GPUs: []int{0}}}
	wantConflict(t, s, replace(elsewhere, 1))
	wantBlock(t, s, withVersion(moved, 2))
}

func testReplaceMakesRoom(t *testing.T, h Harness) {
	s := h.Open(t)
	d := makeBlock("d").on("n3", 0).obj()
	mustCommit(t, s, insert(d))
	// One change moves d off n3 and puts e in its place.
	moved := d
	moved.Placements = []core.Placement{{Node: "n4", GPUs: []int{0}}}
	e := makeBlock("e").on("n3", 0).obj()
	c := replace(moved, 1)
	c.Insert = []core.Block{e}
	mustCommit(t, s, c)
	wantBlock(t, s, withVersion(moved, 2))
	wantBlock(t, s, withVersion(e, 1))
}

// testReplaceFrom: a block moved while it runs holds its new GPUs from
// the move on; the hours before it are not checked again, so a block
// that ended on the new GPUs before the move, live until its expiry is
// committed, does not refuse it.
func testReplaceFrom(t *testing.T, h Harness) {
	s := h.Open(t)
	ended := makeBlock("ended").on("n1", 0).hours(1, 3).obj()
	running := makeBlock("running").on("n2", 0).hours(2, 6).obj()
	mustCommit(t, s, insert(ended, running))
	moved := running
	moved.Placements = []core.Placement{{Node: "n1", GPUs: []int{0}}}
	wantConflict(t, s, replace(moved, 1)) // over its whole window, it overlaps hour 2
	c := replace(moved, 1)
	c.Update[0].From = hour(3).Add(30 * time.Minute)
	mustCommit(t, s, c)
	wantBlock(t, s, withVersion(moved, 2))
	// From on, the new GPUs are taken; ended's hours are still its own.
	wantConflict(t, s, insert(makeBlock("after").on("n1", 0).hours(4, 5).obj()))
	wantConflict(t, s, insert(makeBlock("under").on("n1", 0).hours(1, 2).obj()))
	// An extension keeps the move's start.
	longer := withVersion(moved, 2)
	longer.End = hour(7)
	mustCommit(t, s, update(longer, 2))
	wantConflict(t, s, insert(makeBlock("later").on("n1", 0).hours(6, 7).obj()))
}

func testExtend(t *testing.T, h Harness) {
	s := h.Open(t)
	a := makeBlock("a").on("n1", 0).hours(0, 4).obj()
	b := makeBlock("b").on("n1", 0).hours(6, 8).obj()
	mustCommit(t, s, insert(a, b))

	// Extending up to b is fine, and the new range is taken.
	a6 := a
	a6.End = hour(6)
	mustCommit(t, s, update(a6, 1))
	wantBlock(t, s, withVersion(a6, 2))
	wantConflict(t, s, insert(makeBlock("c").on("n1", 0).hours(5, 6).obj()))

	// Extending into b is refused and changes nothing.
	a7 := a6
	a7.End = hour(7)
	wantConflict(t, s, update(a7, 2))
	wantBlock(t, s, withVersion(a6, 2))

	// Shortening frees the end of the range.
	a3 := a6
	a3.End = hour(3)
	mustCommit(t, s, update(a3, 2))
	wantBlock(t, s, withVersion(a3, 3))
	mustCommit(t, s, insert(makeBlock("d").on("n1", 0).hours(3, 6).obj()))
}

func testLiveness(t *testing.T, h Harness) {
	s := h.Open(t)
	a := makeBlock("a").on("n1", 0).obj()
	mustCommit(t, s, insert(a))

	// A cancelled block keeps its placements but no longer holds them.
	cancelled := a
	cancelled.State = core.StateCancelled
	mustCommit(t, s, update(cancelled, 1))
	wantBlock(t, s, withVersion(cancelled, 2))
	b := makeBlock("b").on("n1", 0).obj()
	mustCommit(t, s, insert(b))

	// Coming back to life would double-book n1's GPU 0.
	revived := cancelled
	revived.State = core.StateScheduled
	wantConflict(t, s, update(revived, 2))
	wantBlock(t, s, withVersion(cancelled, 2))

	// Once b expires, its GPU is free for a new block.
	expired := b
	expired.State = core.StateExpired
	c := update(expired, 1)
	c.Insert = []core.Block{makeBlock("c").on("n1", 0).obj()}
	mustCommit(t, s, c)
	got, err := s.ListBlocks(t.Context(), store.BlockFilter{States: []core.BlockState{core.StateScheduled}})
	if err != nil {
		t.Fatalf("ListBlocks: %v", err)
	}
	if len(got) != 1 || got[0].ID != "c" {
		t.Fatalf("scheduled blocks: got %+v, want c only", got)
	}
}
