package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// plansTests check training plans: written by Commit (Change.InsertPlans)
// with their segment blocks, read by the methods of store.Plans.
var plansTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"PlansRoundTrip", testPlansRoundTrip},
	{"PlansAtomic", testPlansAtomic},
	{"PlansDuplicateID", testPlansDuplicateID},
	{"PlansInvalid", testPlansInvalid},
	{"PlansList", testPlansList},
}

// samplePlan is a plan of team with two segments of 1 GPU on node, over
// hours [0, 4) and [8, 12), the segments listed last first.
func samplePlan(id, team, node string) (core.Plan, []core.Block) {
	s1 := makeBlock(id+"-s1").team(team).on(node, 0).hours(0, 4).obj()
	s2 := makeBlock(id+"-s2").team(team).on(node, 0).hours(8, 12).obj()
	s1.PlanID, s2.PlanID = id, id
	p := core.Plan{ID: id, Name: "plan " + id, Team: team, Target: core.TargetTrainingJob,
		Fee: core.Money{Minor: s1.Fee.Minor + s2.Fee.Minor, Currency: "USD"}, CreatedAt: hour(-2)}
	return p, []core.Block{s2, s1}
}

// wantPlan fails the test unless the stored plan equals want with its
// segments (in time order, at version 1).
func wantPlan(t *testing.T, s store.Full, want core.Plan, segments ...core.Block) {
	t.Helper()
	got, err := s.Plan(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("Plan(%s): %v", want.ID, err)
	}
	want.Segments = nil
	for _, b := range segments {
		want.Segments = append(want.Segments, withVersion(b, 1))
	}
	core.SortSegments(want.Segments)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("Plan(%s) mismatch (-want +got):\n%s", want.ID, diff)
	}
}

func wantNoPlan(t *testing.T, s store.Full, id string) {
	t.Helper()
	if _, err := s.Plan(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Plan(%s): got error %v, want ErrNotFound", id, err)
	}
}

func testPlansRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	p, segs := samplePlan("tp-1", "team-a", "n1")
	alone := makeBlock("alone").on("n2", 0).obj()
	mustCommit(t, s, store.Change{Insert: append(segs, alone), InsertPlans: []core.Plan{p}})
	wantPlan(t, s, p, segs...)
	// The segments name their plan; a block bought alone names none.
	wantBlock(t, s, withVersion(segs[0], 1))
	wantBlock(t, s, withVersion(alone, 1))
	wantNoPlan(t, s, "tp-none")

	// A segment's later state shows in the plan.
	active := segs[1]
	active.State = core.StateActive
	mustCommit(t, s, update(active, 1))
	got, err := s.Plan(t.Context(), p.ID)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if got.Segments[0].State != core.StateActive || got.Segments[0].Version != 2 {
		t.Errorf("first segment after an update: %+v", got.Segments[0])
	}
	if h.Reopen == nil {
		return
	}
	s = h.Reopen(t, s)
	if got2, err := s.Plan(t.Context(), p.ID); err != nil || len(got2.Segments) != 2 {
		t.Fatalf("Plan after reopen: %+v, %v", got2, err)
	}
}

func testPlansAtomic(t *testing.T, h Harness) {
	s := h.Open(t)
	// Another block holds the GPU of the plan's second segment.
	mustCommit(t, s, insert(makeBlock("taken").on("n1", 0).hours(9, 10).obj()))
	p, segs := samplePlan("tp-1", "team-a", "n1")
	wantConflict(t, s, store.Change{Insert: segs, InsertPlans: []core.Plan{p},
		Journals: []core.Journal{charge("l1", "team-a", hour(-2), p.Fee, segs[0].ID)},
		Events:   []core.Event{{ID: "e1", Time: hour(-2), Type: core.EventPlanScheduled, Subject: p.ID, Team: p.Team}}})
	wantNoPlan(t, s, p.ID)
	for _, b := range segs {
		wantNoBlock(t, s, b.ID)
	}
	wantNoLedger(t, s, "team-a")
	wantNoEvents(t, s)
	// The first segment's GPU stayed free.
	mustCommit(t, s, insert(makeBlock("free").on("n1", 0).hours(0, 4).obj()))
}

func testPlansDuplicateID(t *testing.T, h Harness) {
	s := h.Open(t)
	p, segs := samplePlan("tp-1", "team-a", "n1")
	mustCommit(t, s, store.Change{Insert: segs, InsertPlans: []core.Plan{p}})
	again, segs2 := samplePlan("tp-1", "team-b", "n2")
	for i := range segs2 {
		segs2[i].ID += "-again"
	}
	wantConflict(t, s, store.Change{Insert: segs2, InsertPlans: []core.Plan{again}})
	for _, b := range segs2 {
		wantNoBlock(t, s, b.ID)
	}
	wantPlan(t, s, p, segs...)
}

func testPlansInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	p, segs := samplePlan("", "team-a", "n1")
	if err := s.Commit(t.Context(), store.Change{Insert: segs, InsertPlans: []core.Plan{p}}); err == nil {
		t.Fatalf("Commit of a plan without an id succeeded")
	}
	for _, b := range segs {
		wantNoBlock(t, s, b.ID)
	}
}

func testPlansList(t *testing.T, h Harness) {
	s := h.Open(t)
	a1, a1segs := samplePlan("tp-a1", "team-a", "n1")
	a2, a2segs := samplePlan("tp-a2", "team-a", "n2")
	b1, b1segs := samplePlan("tp-b1", "team-b", "n3")
	a2.CreatedAt, b1.CreatedAt = hour(-1), hour(-3)
	var blocks []core.Block
	for _, segs := range [][]core.Block{a2segs, b1segs, a1segs} {
		blocks = append(blocks, segs...)
	}
	mustCommit(t, s, store.Change{Insert: blocks, InsertPlans: []core.Plan{a2, b1, a1}})
	type summary struct {
		ID       string
		Segments []string
	}
	list := func(team string) []summary {
		ps, err := s.ListPlans(t.Context(), team)
		if err != nil {
			t.Fatalf("ListPlans(%q): %v", team, err)
		}
		var out []summary
		for _, p := range ps {
			sm := summary{ID: p.ID}
			for _, b := range p.Segments {
				sm.Segments = append(sm.Segments, b.ID)
			}
			out = append(out, sm)
		}
		return out
	}
	for name, tc := range map[string]struct {
		team string
		want []summary
	}{
		"one team": {"team-a", []summary{{"tp-a1", []string{"tp-a1-s1", "tp-a1-s2"}}, {"tp-a2", []string{"tp-a2-s1", "tp-a2-s2"}}}},
		"every team": {"", []summary{{"tp-b1", []string{"tp-b1-s1", "tp-b1-s2"}}, {"tp-a1", []string{"tp-a1-s1", "tp-a1-s2"}},
			{"tp-a2", []string{"tp-a2-s1", "tp-a2-s2"}}}},
		"a team with none": {"team-c", nil},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, list(tc.team), cmpOpts...); diff != "" {
				t.Errorf("ListPlans(%q) (-want +got):\n%s", tc.team, diff)
			}
		})
	}
}
