package core

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestStepDueIsWhenStepMoves checks stepDue against the state machine
// itself: step moves a block at t exactly when t is not before stepDue,
// for every state and flag, and for limits whose warning comes after the
// termination (a fleet built in code is not checked as a fleet file is).
func TestStepDueIsWhenStepMoves(t *testing.T) {
	def := DefaultLimits()
	late := def
	late.WarnBefore, late.TerminateBefore = 10*time.Minute, time.Hour
	none := def
	none.WarnBefore, none.TerminateBefore, none.ApprovalDeadline = 0, 0, 0
	limits := map[string]Limits{"default": def, "warning after termination": late, "no notice": none}
	start, end := at(10), at(20)
	var blocks []Block
	for _, st := range []BlockState{StatePaymentPending, StateScheduled, StateActive, StateExpired, StateCancelled, StatePaymentFailed} {
		for _, warned := range []bool{false, true} {
			for _, term := range []bool{false, true} {
				blocks = append(blocks, Block{ID: "b", State: st, Start: start, End: end, Warned: warned, Terminating: term})
			}
		}
	}
	for name, l := range limits {
		for _, b := range blocks {
			due, ok := stepDue(b, l)
			for m := 0; m <= 22*60; m++ {
				now := at(0).Add(time.Duration(m) * time.Minute)
				_, _, moves := step(b, now, l)
				if want := ok && !now.Before(due); moves != want {
					t.Fatalf("%s: %s warned=%v terminating=%v at %s: step moves %v, stepDue says %v (due %s, %v)",
						name, b.State, b.Warned, b.Terminating, now.Format(time.RFC3339), moves, want, due.Format(time.RFC3339), ok)
				}
			}
		}
	}
}

// TestDueFollowsEveryChange changes an index at random (blocks added,
// stepped, removed, assumed, confirmed and forgotten) and after each
// change compares Due and NextDue with a walk of every block: Due(now)
// must be the blocks that Advance would step at now, earliest first, and
// NextDue the earliest step of any block.
func TestDueFollowsEveryChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	ix := newTestIndex(t)
	var live []string // ids of blocks added, live or not any more
	inFlight := map[string]bool{}
	randomBlock := func(id string) Block {
		s := rng.IntN(40)
		b := makeBlock(id).on(fmt.Sprintf("n%d", 1+rng.IntN(4)), rng.IntN(8)).hours(s, s+1+rng.IntN(30)).obj()
		b.State = []BlockState{StatePaymentPending, StateScheduled, StateActive, StateActive, StateExpired}[rng.IntN(5)]
		b.Warned = b.State == StateActive && rng.IntN(2) == 0
		b.Terminating = b.Warned && rng.IntN(2) == 0
		return b
	}
	for i := range 800 {
		switch op := rng.IntN(7); {
		case op <= 1 || len(live) == 0:
			id := fmt.Sprintf("b%d", i)
			if err := ix.Add(randomBlock(id)); err == nil {
				live = append(live, id)
			}
		case op == 2:
			// A committed step or a new version of a block.
			id := live[rng.IntN(len(live))]
			if b, ok := ix.Block(id); ok && !ix.Assumed(id) {
				next, _ := Advance(*b, at(rng.IntN(50)), ix.Fleet.Limits)
				if err := ix.Add(next); err != nil {
					t.Fatal(err)
				}
			}
		case op == 3 || op == 6:
			ix.Remove(live[rng.IntN(len(live))])
		case op == 4:
			id := live[rng.IntN(len(live))]
			if _, ok := ix.Block(id); ok && !ix.Assumed(id) {
				nb := randomBlock(id)
				if ix.AssumeAs("k"+id, nb) == nil {
					inFlight["k"+id] = true
				}
			}
		default:
			for k := range inFlight {
				if rng.IntN(2) == 0 {
					ix.Confirm(k)
				} else {
					ix.Forget(k)
				}
				delete(inFlight, k)
				break
			}
		}
		checkDue(t, ix, i)
	}
}

// checkDue compares Due and NextDue with a walk of every block.
func checkDue(t *testing.T, ix *Index, round int) {
	t.Helper()
	var first time.Time
	found := false
	for _, b := range ix.Blocks() {
		if at, ok := stepDue(*b, ix.Fleet.Limits); ok && (!found || at.Before(first)) {
			first, found = at, true
		}
	}
	if got, ok := ix.NextDue(); ok != found || !got.Equal(first) {
		t.Fatalf("round %d: NextDue = %s, %v; the blocks' earliest step is %s, %v", round, got, ok, first, found)
	}
	for _, h := range []int{0, 9, 10, 15, 19, 20, 35, 60} {
		now := at(h).Add(-20 * time.Minute)
		type due struct {
			At time.Time
			ID string
		}
		var want, got []due
		for _, b := range ix.Blocks() {
			if _, ts := Advance(*b, now, ix.Fleet.Limits); len(ts) > 0 {
				want = append(want, due{ts[0].At, b.ID})
			}
		}
		sort.Slice(want, func(i, j int) bool {
			if !want[i].At.Equal(want[j].At) {
				return want[i].At.Before(want[j].At)
			}
			return want[i].ID < want[j].ID
		})
		for _, b := range ix.Due(now) {
			at, _ := stepDue(*b, ix.Fleet.Limits)
			got = append(got, due{at, b.ID})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: Due(%s) (-walk of every block +Due):\n%s", round, now.Format(time.RFC3339), diff)
		}
	}
	checkHeap(t, &ix.due, round)
}

// TestDueOfADecisionInFlight: a block in flight is due as assumed, and a
// forgotten decision puts the block back at its own step.
func TestDueOfADecisionInFlight(t *testing.T) {
	a := makeBlock("a").on("n1", 0).hours(10, 20).obj()
	ix := newTestIndex(t, a, makeBlock("b").on("n2", 0).hours(12, 20).obj())
	ids := func(now time.Time) []string {
		var out []string
		for _, b := range ix.Due(now) {
			out = append(out, b.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"a", "b"}, ids(at(12))); diff != "" {
		t.Errorf("due at 12h (-want +got):\n%s", diff)
	}
	moved := makeBlock("a").on("n1", 0).hours(14, 20).obj()
	if err := ix.AssumeAs("a", moved); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, ids(at(12))); diff != "" {
		t.Errorf("due at 12h, a assumed to start at 14h (-want +got):\n%s", diff)
	}
	if first, _ := ix.NextDue(); !first.Equal(at(12)) {
		t.Errorf("NextDue = %s, want 12h", first)
	}
	ix.Forget("a")
	if first, _ := ix.NextDue(); !first.Equal(at(10)) {
		t.Errorf("NextDue after Forget = %s, want 10h", first)
	}
	cancelled := a
	cancelled.State = StateCancelled
	if err := ix.AssumeAs("a", cancelled); err != nil {
		t.Fatal(err)
	}
	ix.Confirm("a")
	if diff := cmp.Diff([]string{"b"}, ids(at(30))); diff != "" {
		t.Errorf("due at 30h, a cancelled (-want +got):\n%s", diff)
	}
}

// TestDueQueue sets, moves and removes ids at random and compares the
// queue with a plain map: its first item, the ids due by a time in order,
// and the heap's order and positions.
func TestDueQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := newDueQueue(0)
	model := map[string]time.Time{}
	for round := range 2000 {
		id := fmt.Sprintf("b%d", rng.IntN(200))
		if rng.IntN(3) == 0 {
			q.remove(id)
			delete(model, id)
		} else {
			when := at(rng.IntN(100))
			q.set(id, when)
			model[id] = when
		}
		var want []*dueEntry
		for id, when := range model {
			want = append(want, &dueEntry{at: when, id: id})
		}
		sort.Slice(want, func(i, j int) bool { return dueLess(want[i], want[j]) })
		first, ok := q.first()
		if ok != (len(want) > 0) || ok && !first.Equal(want[0].at) {
			t.Fatalf("round %d: first = %s, %v; want %v", round, first, ok, want[:min(1, len(want))])
		}
		by := at(rng.IntN(100))
		var wantIDs []string
		for _, it := range want {
			if !it.at.After(by) {
				wantIDs = append(wantIDs, it.id)
			}
		}
		if diff := cmp.Diff(wantIDs, q.dueBy(by), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: due by %s (-want +got):\n%s", round, by, diff)
		}
		checkHeap(t, &q, round)
	}
}

// checkHeap checks the heap's order and each id's position.
func checkHeap(t *testing.T, q *dueQueue, round int) {
	t.Helper()
	for i, e := range q.items {
		if e.pos != i || q.byID[e.id] != e {
			t.Fatalf("round %d: %s at %d, its position says %d, its id leads to %p, not %p", round, e.id, i, e.pos, q.byID[e.id], e)
		}
		if i > 0 && dueLess(e, q.items[(i-1)/2]) {
			t.Fatalf("round %d: %s is earlier than its parent", round, e.id)
		}
	}
	if len(q.byID) != len(q.items) {
		t.Fatalf("round %d: %d ids for %d queued entries", round, len(q.byID), len(q.items))
	}
}
