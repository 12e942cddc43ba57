package core

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testNotice = 10 * time.Minute

func backfillType(t *testing.T, ix *Index, name string) InstanceType {
	t.Helper()
	typ, ok := ix.Fleet.Type(name)
	if !ok {
		t.Fatalf("no type %s", name)
	}
	return typ
}

// where lists node:GPUs of allocations, for comparing.
func where(allocs []BackfillAlloc) []string {
	var out []string
	for _, a := range allocs {
		s := a.Node + ":"
		for _, g := range a.GPUs {
			s += string(rune('0' + g))
		}
		out = append(out, s)
	}
	return out
}

func TestBackfillPlaceUnsold(t *testing.T) {
	ix := newTestIndex(t,
		makeBlock("a").whole("n1").hours(0, 10).state(StateActive).obj(),
		makeBlock("b").whole("n2").hours(2, 4).obj())
	now := at(0).Add(5 * time.Minute)
	got, err := ix.BackfillPlace(BackfillRequest{Type: backfillType(t, ix, "h100.8x"), Count: 3}, nil, nil, testNotice, now)
	if err != nil {
		t.Fatal(err)
	}
	// n1 is held now; n3 and n4 are never needed, so they go first; n2 is
	// needed when b starts.
	if diff := cmp.Diff([]string{"n3:01234567", "n4:01234567", "n2:01234567"}, where(got)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if !got[0].NeededAt.IsZero() || !got[2].NeededAt.Equal(at(2)) {
		t.Errorf("needed at %v and %v, want never and %v", got[0].NeededAt, got[2].NeededAt, at(2))
	}
	if got[2].Lent != "" {
		t.Errorf("unsold GPUs lent by %q", got[2].Lent)
	}
	// A fourth whole node does not exist now: all or nothing.
	if _, err := ix.BackfillPlace(BackfillRequest{Type: backfillType(t, ix, "h100.8x"), Count: 4}, nil, nil, testNotice, now); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("4 nodes: %v, want no capacity", err)
	}
}

func TestBackfillPlaceNotice(t *testing.T) {
	ix := newTestIndex(t, makeBlock("b").whole("n2", "n3", "n4").hours(1, 4).obj())
	typ := backfillType(t, ix, "h100.8x")
	// 55 minutes past: b starts in 5 minutes, inside the notice, so its
	// nodes take nothing.
	got, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 1}, nil, nil, testNotice, at(0).Add(55*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"n1:01234567"}, where(got)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if _, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 2}, nil, nil, testNotice, at(0).Add(55*time.Minute)); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("2 nodes 5 minutes before b: %v, want no capacity", err)
	}
	// 45 minutes past, b's nodes still have more than the notice to run.
	if _, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 4}, nil, nil, testNotice, at(0).Add(45*time.Minute)); err != nil {
		t.Errorf("4 nodes 15 minutes before b: %v", err)
	}
}

func TestBackfillPlaceSkipsRunningBestFit(t *testing.T) {
	ix := newTestIndex(t)
	running := []BackfillAlloc{{ID: "j1", Node: "n1", GPUs: gpus(0, 4)}}
	got, err := ix.BackfillPlace(BackfillRequest{Type: backfillType(t, ix, "h100.1x"), Count: 5}, running, nil, testNotice, at(0))
	if err != nil {
		t.Fatal(err)
	}
	// n1's four free GPUs first (fullest node), then one of n2.
	if diff := cmp.Diff([]string{"n1:4", "n1:5", "n1:6", "n1:7", "n2:0"}, where(got)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
}

func TestBackfillNeverBlocksASale(t *testing.T) {
	ix := newTestIndex(t)
	typ := backfillType(t, ix, "h100.8x")
	now := at(0)
	running, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 4}, nil, nil, testNotice, now)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ix)
	// Backfill holds every GPU, yet a search still offers them all and a
	// purchase over them is placed.
	offers, err := ix.Search(SearchRequest{Types: []string{"h100.8x"}, Count: 4, Duration: 3 * time.Hour,
		StartAfter: at(1), EndBefore: at(4)}, now)
	if err != nil || len(offers) == 0 {
		t.Fatalf("search while backfill runs: %v, %d offers", err, len(offers))
	}
	plan, err := ix.Place(PlaceRequest{Type: typ, Count: 4, Zone: "z", Start: at(1), End: at(4)}, now)
	if err != nil {
		t.Fatalf("purchase over backfill: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, ix)); diff != "" {
		t.Errorf("search and placement changed the index:\n%s", diff)
	}
	b := makeBlock("sold").hours(1, 4).obj()
	b.InstanceType, b.Count, b.Placements = "h100.8x", 4, plan.Placements
	if err := ix.Add(b); err != nil {
		t.Fatal(err)
	}
	due := ix.BackfillDue(running, nil, now)
	for _, a := range due {
		if !a.NeededAt.Equal(at(1)) {
			t.Errorf("%s needed at %v, want the block's start %v", a.Node, a.NeededAt, at(1))
		}
		for _, c := range []struct {
			at   time.Time
			want BackfillStep
		}{
			{at(1).Add(-testNotice - time.Second), BackfillRun},
			{at(1).Add(-testNotice), BackfillWarn},
			{at(1).Add(-time.Second), BackfillWarn},
			{at(1), BackfillRemove},
		} {
			if got := a.Step(testNotice, c.at); got != c.want {
				t.Errorf("step at %v: %v, want %v", c.at, got, c.want)
			}
		}
	}
}

func TestBackfillLending(t *testing.T) {
	ix := newTestIndex(t,
		makeBlock("lend").whole("n1").hours(0, 10).state(StateActive).obj(),
		makeBlock("keep").whole("n2", "n3", "n4").hours(0, 10).state(StateActive).obj())
	typ := backfillType(t, ix, "h100.8x")
	now := at(0).Add(time.Minute)
	// Nothing is lent: nothing fits.
	if _, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 1}, nil, nil, testNotice, now); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("no lending: %v, want no capacity", err)
	}
	lending := []Lending{{BlockID: "lend"}}
	got, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 1}, nil, lending, testNotice, now)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Node != "n1" || got[0].Lent != "lend" || !got[0].NeededAt.IsZero() {
		t.Errorf("got %+v, want n1 lent by lend, never needed", got[0])
	}
	// The holder starts a job at hour 3: the GPUs are needed then.
	lending[0].NeededAt = at(3)
	due := ix.BackfillDue(got, lending, now)
	if !due[0].NeededAt.Equal(at(3)) {
		t.Errorf("needed at %v, want the holder's job start %v", due[0].NeededAt, at(3))
	}
	// A job running there now: the GPUs are needed at once, nothing new fits.
	lending[0].NeededAt = now
	if due := ix.BackfillDue(got, lending, now); due[0].Step(testNotice, now) != BackfillRemove {
		t.Errorf("holder's job running: step %v, want remove", due[0].Step(testNotice, now))
	}
	if _, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 1}, nil, lending, testNotice, now); !errors.Is(err, ErrNoCapacity) {
		t.Errorf("holder running: %v, want no capacity", err)
	}
}

func TestBackfillUnhealthy(t *testing.T) {
	ix := newTestIndex(t)
	typ := backfillType(t, ix, "h100.8x")
	running, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 1}, nil, nil, testNotice, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.SetHealth(running[0].Node, Unhealthy); err != nil {
		t.Fatal(err)
	}
	if due := ix.BackfillDue(running, nil, at(0)); due[0].Step(testNotice, at(0)) != BackfillRemove {
		t.Errorf("on an unhealthy node: step %v, want remove", due[0].Step(testNotice, at(0)))
	}
	got, err := ix.BackfillPlace(BackfillRequest{Type: typ, Count: 3}, nil, nil, testNotice, at(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.Node == running[0].Node {
			t.Errorf("placed on unhealthy %s", a.Node)
		}
	}
	if due := ix.BackfillDue([]BackfillAlloc{{Node: "gone", GPUs: []int{0}}}, nil, at(0)); !due[0].NeededAt.Equal(at(0)) {
		t.Errorf("on a node no longer in the fleet: needed at %v, want now", due[0].NeededAt)
	}
}
