package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// assumeCall is one AssumeAs of a test: the blocks, under key.
type assumeCall struct {
	key    string
	blocks []Block
}

func (c assumeCall) apply(ix *Index) error { return ix.AssumeAs(c.key, c.blocks...) }

// TestAssumeForgetConfirm takes decisions as assumed on an index. While
// they are in flight, every GPU that a block holds before or after them
// is taken and no team holds less than before or after; Forget leaves the
// index exactly as before, and Confirm as if the decided blocks had been
// Added in the order assumed.
func TestAssumeForgetConfirm(t *testing.T) {
	a := makeBlock("a").on("n1", gpus(0, 4)...).obj()
	tests := map[string]struct {
		base  []Block
		calls []assumeCall
	}{
		"a new block": {
			base:  []Block{a},
			calls: []assumeCall{{"x", []Block{makeBlock("x").on("n1", 4, 5).on("n2", 0).obj()}}},
		},
		"a new block on the node it moves a tentative block off": {
			base: []Block{makeBlock("m").whole("n1").obj()},
			calls: []assumeCall{{"x", []Block{
				makeBlock("x").whole("n1").hours(12, 18).obj(),
				makeBlock("m").whole("n2").obj(),
			}}},
		},
		"an extension on the same GPUs": {
			base:  []Block{a},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n1", gpus(0, 4)...).hours(10, 30).obj()}}},
		},
		"an extension that moves the block in its way": {
			base: []Block{
				makeBlock("a").whole("n1").obj(),
				makeBlock("b").whole("n1").hours(20, 28).obj(),
			},
			calls: []assumeCall{{"a", []Block{
				makeBlock("a").whole("n1").hours(10, 30).obj(),
				makeBlock("b").whole("n2").hours(20, 28).obj(),
			}}},
		},
		"a re-placement on other GPUs of the node": {
			base:  []Block{a},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n1", gpus(4, 8)...).obj()}}},
		},
		"a re-placement on another node, keeping some GPUs": {
			base:  []Block{makeBlock("a").on("n1", 0, 1).on("n3", 0, 1).obj()},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n2", 0, 1).on("n3", 0, 1).obj()}}},
		},
		"a version with fewer instances": {
			base:  []Block{a},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n1", 0, 1).hours(15, 25).obj()}}},
		},
		"a version of another team": {
			base:  []Block{a},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n1", gpus(0, 4)...).team("t2").obj()}}},
		},
		"a cancellation": {
			base:  []Block{a, makeBlock("w").whole("n3").obj()},
			calls: []assumeCall{{"a", []Block{makeBlock("a").on("n1", gpus(0, 4)...).state(StateCancelled).obj()}}},
		},
		"an approval": {
			base:  []Block{makeBlock("a").on("n1", gpus(0, 4)...).state(StatePaymentPending).obj()},
			calls: []assumeCall{{"a", []Block{a}}},
		},
		"a plan whose second segment moves the first": {
			base: []Block{a},
			calls: []assumeCall{
				{"tp", []Block{makeBlock("s1").whole("n2").obj()}},
				{"tp", []Block{
					makeBlock("s2").whole("n2").hours(15, 25).obj(),
					makeBlock("s1").whole("n3").obj(),
				}},
			},
		},
		"a plan that moves a block twice": {
			base: []Block{makeBlock("m").whole("n2").obj()},
			calls: []assumeCall{
				{"tp", []Block{makeBlock("s1").whole("n2").obj(), makeBlock("m").whole("n3").obj()}},
				{"tp", []Block{makeBlock("s2").whole("n3").obj(), makeBlock("m").whole("n4").obj()}},
			},
		},
		"two decisions in flight": {
			base: []Block{a},
			calls: []assumeCall{
				{"x", []Block{makeBlock("x").on("n2", 0).obj()}},
				{"a", []Block{makeBlock("a").on("n1", gpus(0, 4)...).hours(10, 30).obj()}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// The index the decisions lead to, Added plainly.
			confirmed := newTestIndex(t, tc.base...)
			for _, c := range tc.calls {
				for _, b := range c.blocks {
					if err := confirmed.Add(b); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := snapshot(t, confirmed)

			ix := newTestIndex(t, tc.base...)
			before := snapshot(t, ix)
			for _, c := range tc.calls {
				if err := c.apply(ix); err != nil {
					t.Fatalf("AssumeAs(%s): %v", c.key, err)
				}
			}
			checkInFlight(t, ix, before, want, tc.base, tc.calls)
			for _, key := range keysOf(tc.calls) {
				if !ix.Forget(key) {
					t.Errorf("Forget(%s): not in flight", key)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
				t.Fatalf("after Forget (-before Assume +after Forget):\n%s", diff)
			}

			ix = newTestIndex(t, tc.base...)
			for _, c := range tc.calls {
				if err := c.apply(ix); err != nil {
					t.Fatalf("AssumeAs(%s): %v", c.key, err)
				}
			}
			for _, key := range keysOf(tc.calls) {
				if !ix.Confirm(key) {
					t.Errorf("Confirm(%s): not in flight", key)
				}
			}
			if diff := cmp.Diff(want, snapshot(t, ix)); diff != "" {
				t.Fatalf("after Confirm (-Added plainly +confirmed):\n%s", diff)
			}
			if ix.Confirm(tc.calls[0].key) || ix.Forget(tc.calls[0].key) {
				t.Errorf("a decision confirmed is still in flight")
			}
		})
	}
}

// checkInFlight checks an index with decisions in flight against the
// index before them and after them: each block of the calls is assumed,
// every GPU held before or after (by a block's version in base, or its
// last version in calls) at some hour is taken, and at every hour a team
// holds at least what it held before and what it holds after.
func checkInFlight(t *testing.T, ix *Index, before, after indexSnapshot, base []Block, calls []assumeCall) {
	t.Helper()
	last := map[string]Block{}
	for _, c := range calls {
		for _, b := range c.blocks {
			if !ix.Assumed(b.ID) {
				t.Errorf("block %s is not assumed", b.ID)
			}
			last[b.ID] = b
		}
	}
	versions := append([]Block{}, base...)
	for _, b := range last {
		versions = append(versions, b)
	}
	for _, b := range versions {
		if !b.State.Live() {
			continue
		}
		for h := ix.hourOf(b.Start); h < ix.hourOf(b.End); h++ {
			for _, pl := range b.Placements {
				if free := ix.freeMask(ix.nodeIdx[pl.Node], h, h+1, nil) & maskOf(pl.GPUs); free != 0 {
					t.Errorf("GPUs %08b of node %s are free at hour %d, held by a version of block %s", free, pl.Node, h, b.ID)
				}
			}
		}
	}
	now := snapshot(t, ix)
	for key, counts := range now.Held {
		for h, n := range counts {
			if n < before.Held[key][h] || n < after.Held[key][h] {
				t.Errorf("%s holds %d at hour %d in flight, %d before and %d after", key, n, h, before.Held[key][h], after.Held[key][h])
			}
		}
	}
}

func keysOf(calls []assumeCall) []string {
	var keys []string
	for _, c := range calls {
		if !containsString(keys, c.key) {
			keys = append(keys, c.key)
		}
	}
	return keys
}

// TestAssumeRefused assumes decisions that AssumeAs must refuse, with or
// without another decision in flight: the index must be exactly as before
// the refused call, and the decision in flight still forgets to the base.
func TestAssumeRefused(t *testing.T) {
	a := makeBlock("a").on("n1", gpus(0, 4)...).obj()
	tests := map[string]struct {
		base     []Block
		inFlight []assumeCall
		call     assumeCall
		wantErr  string
		conflict bool
	}{
		"GPUs of a committed block": {
			base:     []Block{a},
			call:     assumeCall{"x", []Block{makeBlock("x").on("n1", 3, 4).hours(15, 25).obj()}},
			wantErr:  "block x: GPUs of node n1 are taken by block a from 2026-12-01T15:00:00Z to 2026-12-01T20:00:00Z",
			conflict: true,
		},
		"GPUs of a block another decision assumes": {
			inFlight: []assumeCall{{"y", []Block{makeBlock("y").on("n2", 0).obj()}}},
			call:     assumeCall{"x", []Block{makeBlock("x").on("n2", 0).hours(15, 16).obj()}},
			wantErr:  "taken by block y",
			conflict: true,
		},
		"GPUs that another decision moves a block off": {
			base:     []Block{a},
			inFlight: []assumeCall{{"a", []Block{makeBlock("a").on("n2", gpus(0, 4)...).obj()}}},
			call:     assumeCall{"x", []Block{makeBlock("x").on("n1", 0).obj()}},
			wantErr:  "taken by block a",
			conflict: true,
		},
		"a block another decision changes": {
			base:     []Block{a},
			inFlight: []assumeCall{{"a", []Block{makeBlock("a").on("n1", gpus(0, 4)...).hours(10, 30).obj()}}},
			call:     assumeCall{"x", []Block{makeBlock("a").on("n1", gpus(0, 4)...).hours(10, 40).obj()}},
			wantErr:  "block a is changed by a decision not yet committed",
			conflict: true,
		},
		"two blocks of one decision on the same GPUs": {
			call: assumeCall{"x", []Block{
				makeBlock("x").on("n2", 0, 1).obj(),
				makeBlock("y").on("n2", 1, 2).hours(19, 25).obj(),
			}},
			wantErr:  "blocks y and x of one decision take the same GPUs",
			conflict: true,
		},
		"a move to an unknown node": {
			base: []Block{a},
			call: assumeCall{"x", []Block{
				makeBlock("x").on("n1", 4).obj(),
				makeBlock("a").on("n9", gpus(0, 4)...).obj(),
			}},
			wantErr: "block a: unknown node n9",
		},
		"a GPU the node does not have": {
			call:    assumeCall{"x", []Block{makeBlock("x").on("n2", 0).on("n3", 9).obj()}},
			wantErr: "block x: node n3 has no GPU 9",
		},
		"a block twice": {
			call:    assumeCall{"x", []Block{makeBlock("x").on("n2", 0).obj(), makeBlock("x").on("n3", 0).obj()}},
			wantErr: "block x: assumed twice in one decision",
		},
		"a block without an id": {
			call:    assumeCall{"x", []Block{makeBlock("").on("n2", 0).obj()}},
			wantErr: "a block to assume needs an id",
		},
		"a plan's second segment on GPUs taken": {
			base: []Block{makeBlock("w").whole("n3").hours(20, 30).obj()},
			inFlight: []assumeCall{{"tp", []Block{
				makeBlock("s1").whole("n2").obj(),
			}}},
			call: assumeCall{"tp", []Block{
				makeBlock("s2").whole("n3").hours(15, 25).obj(),
				makeBlock("s1").whole("n4").obj(),
			}},
			wantErr:  "block s2: GPUs of node n3 are taken by block w",
			conflict: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ix := newTestIndex(t, tc.base...)
			base := snapshot(t, ix)
			for _, c := range tc.inFlight {
				if err := c.apply(ix); err != nil {
					t.Fatalf("AssumeAs(%s): %v", c.key, err)
				}
			}
			before := snapshot(t, ix)
			err := tc.call.apply(ix)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("AssumeAs: got error %v, want one saying %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrConflict); got != tc.conflict {
				t.Errorf("errors.Is(%v, ErrConflict) = %v, want %v", err, got, tc.conflict)
			}
			if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
				t.Fatalf("the index changed after a refused AssumeAs (-before +after):\n%s", diff)
			}
			for _, key := range keysOf(tc.inFlight) {
				ix.Forget(key)
			}
			if diff := cmp.Diff(base, snapshot(t, ix)); diff != "" {
				t.Fatalf("after forgetting what was in flight (-base +after):\n%s", diff)
			}
		})
	}
}

// TestAssumeKeyInFlight: Assume refuses a key in flight, which AssumeAs
// adds to.
func TestAssumeKeyInFlight(t *testing.T) {
	ix := newTestIndex(t)
	if err := ix.Assume(makeBlock("x").on("n1", 0).obj()); err != nil {
		t.Fatal(err)
	}
	err := ix.Assume(makeBlock("x").on("n2", 0).obj())
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Assume of a key in flight: got %v, want ErrConflict", err)
	}
	if err := ix.AssumeAs("x", makeBlock("x").on("n2", 0).obj()); err != nil {
		t.Fatalf("AssumeAs adding to a key in flight: %v", err)
	}
	ix.Forget("x")
	if diff := cmp.Diff(snapshot(t, newTestIndex(t)), snapshot(t, ix)); diff != "" {
		t.Fatalf("after Forget (-empty +after):\n%s", diff)
	}
}

// TestCommittedWinsOverAssumed: a committed version (Add, Remove) of a
// block in flight replaces the assumed one, and the block leaves its
// decision, which Confirm and Forget then no longer change.
func TestCommittedWinsOverAssumed(t *testing.T) {
	a := makeBlock("a").whole("n1").obj()
	elsewhere := makeBlock("a").whole("n3").obj() // another replica moved it
	tests := map[string]struct {
		call      assumeCall
		committed func(*Index) error
		end       func(*Index) bool // Confirm or Forget
		want      []Block
	}{
		"Add, then Forget": {
			call:      assumeCall{"x", []Block{makeBlock("x").whole("n1").hours(12, 18).obj(), makeBlock("a").whole("n2").obj()}},
			committed: func(ix *Index) error { return ix.Add(elsewhere) },
			end:       func(ix *Index) bool { return ix.Forget("x") },
			want:      []Block{elsewhere},
		},
		"Add, then Confirm": {
			call:      assumeCall{"x", []Block{makeBlock("x").whole("n1").hours(12, 18).obj(), makeBlock("a").whole("n2").obj()}},
			committed: func(ix *Index) error { return ix.Add(elsewhere) },
			end:       func(ix *Index) bool { return ix.Confirm("x") },
			want:      []Block{elsewhere, makeBlock("x").whole("n1").hours(12, 18).obj()},
		},
		"Remove, then Confirm": {
			call:      assumeCall{"x", []Block{makeBlock("x").whole("n1").hours(12, 18).obj(), makeBlock("a").whole("n2").obj()}},
			committed: func(ix *Index) error { ix.Remove("a"); return nil },
			end:       func(ix *Index) bool { return ix.Confirm("x") },
			want:      []Block{makeBlock("x").whole("n1").hours(12, 18).obj()},
		},
		"Add of the only block": {
			call:      assumeCall{"a", []Block{makeBlock("a").whole("n1").hours(10, 30).obj()}},
			committed: func(ix *Index) error { return ix.Add(elsewhere) },
			end:       func(ix *Index) bool { return !ix.Forget("a") }, // nothing left in flight
			want:      []Block{elsewhere},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ix := newTestIndex(t, a)
			if err := tc.call.apply(ix); err != nil {
				t.Fatal(err)
			}
			if err := tc.committed(ix); err != nil {
				t.Fatal(err)
			}
			if ix.Assumed("a") {
				t.Errorf("block a is still assumed after its committed version came")
			}
			if !tc.end(ix) {
				t.Errorf("the decision's end reported the wrong key state")
			}
			if diff := cmp.Diff(snapshot(t, newTestIndex(t, tc.want...)), snapshot(t, ix)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSearchSkipsAssumed: capacity a decision in flight takes, or gives
// up, is not offered, placed or counted free until the decision ends.
func TestSearchSkipsAssumed(t *testing.T) {
	whole := indexFleet().Types[0]
	search := func(ix *Index, count int) []Offering {
		t.Helper()
		offers, err := ix.Search(SearchRequest{Types: []string{whole.Name}, Count: count, Duration: 24 * time.Hour,
			StartAfter: at(10), EndBefore: at(34), MaxResults: 1}, indexNow)
		if err != nil {
			t.Fatal(err)
		}
		return offers
	}
	place := func(ix *Index, count int) error {
		_, err := ix.Place(PlaceRequest{Type: whole, Count: count, Zone: "z", Start: at(10), End: at(34)}, indexNow)
		return err
	}
	freeAt := func(ix *Index, h int) int {
		slots, err := ix.Availability(whole, "z", at(h), at(h+1))
		if err != nil {
			t.Fatal(err)
		}
		return slots[0].Free
	}
	tests := map[string]struct {
		base      []Block
		call      assumeCall
		count     int // asked for, over hours [10, 34)
		freeAfter int // at hour 20 after Confirm
	}{
		"a new block": {
			call:      assumeCall{"x", []Block{makeBlock("x").whole("n1", "n2", "n3").hours(10, 40).obj()}},
			count:     2,
			freeAfter: 1,
		},
		"a move: its old and new nodes": {
			base:      []Block{makeBlock("m").whole("n1", "n2").hours(10, 40).obj()},
			call:      assumeCall{"m", []Block{makeBlock("m").whole("n3", "n4").hours(10, 40).obj()}},
			count:     1,
			freeAfter: 2,
		},
		"a cancellation": {
			base:      []Block{makeBlock("m").whole("n1", "n2", "n3", "n4").hours(10, 40).obj()},
			call:      assumeCall{"m", []Block{makeBlock("m").whole("n1", "n2", "n3", "n4").hours(10, 40).state(StateCancelled).obj()}},
			count:     1,
			freeAfter: 4,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ix := newTestIndex(t, tc.base...)
			if err := tc.call.apply(ix); err != nil {
				t.Fatal(err)
			}
			if offers := search(ix, tc.count); len(offers) != 0 {
				t.Errorf("in flight, Search offers %+v", offers)
			}
			if err := place(ix, tc.count); !errors.Is(err, ErrNoCapacity) {
				t.Errorf("in flight, Place: got %v, want ErrNoCapacity", err)
			}
			if free := freeAt(ix, 20); free >= tc.count {
				t.Errorf("in flight, %d nodes free at hour 20", free)
			}
			ix.Forget(tc.call.key)
			if diff := cmp.Diff(search(newTestIndex(t, tc.base...), tc.count), search(ix, tc.count)); diff != "" {
				t.Errorf("after Forget, Search (-before +after):\n%s", diff)
			}

			ix = newTestIndex(t, tc.base...)
			if err := tc.call.apply(ix); err != nil {
				t.Fatal(err)
			}
			ix.Confirm(tc.call.key)
			if free := freeAt(ix, 20); free != tc.freeAfter {
				t.Errorf("after Confirm, %d nodes free at hour 20, want %d", free, tc.freeAfter)
			}
			added := newTestIndex(t, tc.base...)
			for _, b := range tc.call.blocks {
				if err := added.Add(b); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(search(added, tc.count), search(ix, tc.count)); diff != "" {
				t.Errorf("after Confirm, Search (-Added plainly +confirmed):\n%s", diff)
			}
		})
	}
}

// TestReplacementsSeeEachOther replaces a failed node in two blocks, each
// replacement assumed before the next is placed, as the service does in
// one decision: the second must not get the GPUs of the first.
func TestReplacementsSeeEachOther(t *testing.T) {
	ix := newTestIndex(t,
		makeBlock("a").on("n1", gpus(0, 4)...).obj(),
		makeBlock("b").on("n1", gpus(4, 8)...).obj(),
		makeBlock("c").on("n2", gpus(0, 4)...).obj(),
		makeBlock("w").whole("n3", "n4").obj(),
	)
	if err := ix.SetHealth("n1", Unhealthy); err != nil {
		t.Fatal(err)
	}
	var replaced []string
	for _, b := range ix.BlocksOn("n1", indexNow) {
		pls, err := ix.PlaceReplacement(b, "n1")
		if errors.Is(err, ErrNoCapacity) {
			continue // degraded
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Placements = pls
		if err := ix.AssumeAs("fail-n1", b); err != nil {
			t.Fatalf("assuming the replacement of %s: %v", b.ID, err)
		}
		replaced = append(replaced, b.ID)
	}
	if diff := cmp.Diff([]string{"a"}, replaced); diff != "" {
		t.Errorf("replaced blocks (-want +got):\n%s", diff)
	}
	ix.Confirm("fail-n1")
	assertNoDoubleBooking(t, ix)
}

// TestInFlightOn: a decision in flight counts for a request only on the
// same GPU model, zone (or any zone) and an overlapping window, in the
// block's new version or its old one.
func TestInFlightOn(t *testing.T) {
	old := makeBlock("a").on("n1", 0).hours(10, 20).obj()
	ix := newTestIndex(t, old)
	if ix.InFlightOn("H100", "z", at(0), at(48)) {
		t.Fatal("nothing is in flight yet")
	}
	moved := makeBlock("a").on("n2", 0).hours(30, 40).obj() // a new version elsewhere in time
	if err := ix.Assume(moved); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		model, zone string
		from, to    int
		want        bool
	}{
		"the new version's window":   {"H100", "z", 35, 36, true},
		"the old version's window":   {"H100", "z", 12, 13, true},
		"any zone":                   {"H100", "", 35, 36, true},
		"between the two":            {"H100", "z", 20, 30, false},
		"another model":              {"A100", "z", 35, 36, false},
		"another zone":               {"H100", "y", 35, 36, false},
		"ends where the block opens": {"H100", "z", 0, 10, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ix.InFlightOn(tc.model, tc.zone, at(tc.from), at(tc.to)); got != tc.want {
				t.Errorf("InFlightOn(%s, %q, %d, %d) = %v, want %v", tc.model, tc.zone, tc.from, tc.to, got, tc.want)
			}
		})
	}
	ix.Forget("a")
	if ix.InFlightOn("H100", "z", at(0), at(48)) {
		t.Fatal("a forgotten decision is still in flight")
	}
}
