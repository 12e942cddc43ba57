package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// fullBlock is a block with every field set.
func fullBlock(id string) core.Block {
	b := makeBlock(id).tags("project", "llm", "cost-center", "42").
		on("n1", 0, 1, 2, 3, 4, 5, 6, 7).on("n7", 3, 1).obj()
	b.Name = "load test"
	b.Team = "team-x"
	b.InstanceType = "h100.8x"
	b.Count = 2
	b.Zone = "eu-1b"
	b.Start = time.Date(2030, 3, 1, 9, 0, 0, 0, time.UTC)
	b.End = b.Start.Add(48 * time.Hour)
	b.State = core.StateActive
	b.Fee = core.Money{Minor: 9_876_543, Currency: "EUR"}
	b.CreatedAt = time.Date(2030, 2, 27, 17, 45, 31, 0, time.UTC)
	b.Warned = true
	b.Terminating = true
	b.Lending = true
	return b
}

func testInsertReadback(t *testing.T, h Harness) {
	s := h.Open(t)
	full := fullBlock("full")
	bare := makeBlock("bare").obj() // no tags, no placements
	// Times in another zone are the same instants.
	zoned := makeBlock("zoned").on("n2", 0).obj()
	cet := time.FixedZone("CET", 3600)
	zoned.Start, zoned.End = zoned.Start.In(cet), zoned.End.In(cet)

	mustCommit(t, s, insert(full, bare, zoned))
	wantBlock(t, s, withVersion(full, 1))
	wantBlock(t, s, withVersion(bare, 1))
	wantBlock(t, s, withVersion(zoned, 1))
}

func testReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	b := fullBlock("b1")
	rec := store.IdempotencyRecord{Team: b.Team, ClientToken: "tok", RequestHash: "h", Subject: b.ID, CreatedAt: hour(-1)}
	j := charge("l1", b.Team, hour(-1), b.Fee, b.ID)
	ev := core.Event{ID: "e1", Time: hour(-1), Type: "block.created", Subject: b.ID, Team: b.Team, Data: map[string]any{"k": "v"}}
	c := store.Change{Insert: []core.Block{b}, Idempotency: []store.IdempotencyRecord{rec},
		Journals: []core.Journal{j}, Events: []core.Event{ev}}
	mustCommit(t, s, c)
	j = c.Journals[0] // with its Seq
	before, err := s.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}

	s = h.Reopen(t, s)
	wantBlock(t, s, withVersion(b, 1))
	gotRec, err := s.Idempotency(t.Context(), rec.Team, rec.ClientToken)
	if err != nil {
		t.Fatalf("Idempotency after reopen: %v", err)
	}
	if diff := cmp.Diff(rec, gotRec); diff != "" {
		t.Errorf("Idempotency after reopen (-want +got):\n%s", diff)
	}
	ledger, err := s.Ledger(t.Context(), b.Team)
	if err != nil {
		t.Fatalf("Ledger after reopen: %v", err)
	}
	if diff := cmp.Diff(j.Entries(), ledger); diff != "" {
		t.Errorf("Ledger after reopen (-want +got):\n%s", diff)
	}
	after, err := s.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatalf("Events after reopen: %v", err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("Events after reopen (-before +after):\n%s", diff)
	}
	// The allocations came back too, and Seq keeps increasing.
	b2 := makeBlock("b2").on("n1", 5).obj()
	b2.Start, b2.End = b.Start, b.Start.Add(time.Hour)
	wantConflict(t, s, insert(b2))
	mustCommit(t, s, store.Change{Events: []core.Event{{ID: "e2", Time: hour(0), Type: "t", Subject: "s", Team: "team-x"}}})
	more, err := s.Events(t.Context(), "", before[0].Seq, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(more) != 1 || more[0].ID != "e2" || more[0].Seq <= before[0].Seq {
		t.Errorf("Events after %d: got %+v, want e2 with a larger Seq", before[0].Seq, more)
	}
}

func testUpdate(t *testing.T, h Harness) {
	s := h.Open(t)
	orig := fullBlock("b1")
	orig.State, orig.Warned, orig.Terminating, orig.Lending = core.StateScheduled, false, false, false
	mustCommit(t, s, insert(orig))

	// Every mutable field changes; the others are kept even when the
	// update carries other values.
	changed := orig
	changed.Name = "renamed"
	changed.State = core.StateActive
	changed.End = orig.End.Add(2 * time.Hour)
	changed.Tags = map[string]string{"new": "tag"}
	changed.Warned = true
	changed.Terminating = true
	changed.Lending = true
	changed.Fee = core.Money{Minor: 1, Currency: "USD"}
	mustCommit(t, s, update(changed, 1))
	wantBlock(t, s, withVersion(changed, 2))

	again := changed
	again.State = core.StateExpired
	mustCommit(t, s, update(again, 2))
	wantBlock(t, s, withVersion(again, 3))
}

func testUpdateStaleVersion(t *testing.T, h Harness) {
	s := h.Open(t)
	b := makeBlock("b1").on("n1", 0).obj()
	mustCommit(t, s, insert(b))
	moved := b
	moved.Name = "moved"
	mustCommit(t, s, update(moved, 1))

	stale := b
	stale.State = core.StateCancelled
	c := update(stale, 1)
	c.Journals = []core.Journal{refund("refund", b.Team, hour(0), b.Fee, b.ID)}
	c.Events = []core.Event{{ID: "e1", Time: hour(0), Type: "block.cancelled", Subject: b.ID, Team: b.Team}}
	wantConflict(t, s, c)
	wantBlock(t, s, withVersion(moved, 2))
	wantNoLedger(t, s, b.Team)
	wantNoEvents(t, s)

	// A block that does not exist fails its version check too.
	wantConflict(t, s, update(makeBlock("ghost").on("n1", 1).obj(), 1))
	wantNoBlock(t, s, "ghost")
}

func testUpdateKeepsPlacements(t *testing.T, h Harness) {
	s := h.Open(t)
	b := makeBlock("b1").on("n1", 0, 1).obj()
	mustCommit(t, s, insert(b))
	// Without Replace, placements in the update are ignored.
	other := b
	other.Placements = []core.Placement{{Node: "n2", GPUs: []int{0}}}
	other.Name = "renamed"
	mustCommit(t, s, update(other, 1))
	want := withVersion(b, 2)
	want.Name = "renamed"
	wantBlock(t, s, want)
	wantConflict(t, s, insert(makeBlock("on-old").on("n1", 1).obj()))
	mustCommit(t, s, insert(makeBlock("on-new").on("n2", 0).obj()))
}

// wantNoLedger fails the test unless team has no ledger entries.
func wantNoLedger(t *testing.T, s store.Store, team string) {
	t.Helper()
	entries, err := s.Ledger(t.Context(), team)
	if err != nil {
		t.Fatalf("Ledger(%s): %v", team, err)
	}
	if len(entries) != 0 {
		t.Fatalf("Ledger(%s) = %+v, want none", team, entries)
	}
}

// wantNoEvents fails the test unless the store has no events.
func wantNoEvents(t *testing.T, s store.Store) {
	t.Helper()
	events, err := s.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(events) != 0 {
		t.Fatalf("Events = %+v, want none", events)
	}
}
