package storetest

import (
	"testing"

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
