package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// handoverTests check hand-overs of blocks' hours: the commits that split
// a block between two teams, and the hand-over rows (Change.Handovers)
// read by the methods of store.Handovers.
var handoverTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"HandoverSplitsBlock", testHandoverSplitsBlock},
	{"HandoverWholeBlock", testHandoverWholeBlock},
	{"HandoversRoundTrip", testHandoversRoundTrip},
	{"HandoverResaleVersions", testHandoverResaleVersions},
	{"OpenReleases", testOpenReleases},
}

func sampleRelease(id, block string, from, until int) store.Handover {
	return store.Handover{ID: id, Kind: core.HandOverRelease, BlockID: block, Team: "team-a", GPUModel: "H100",
		From: hour(from), Until: hour(until), Placements: []core.Placement{{Node: "n1", GPUs: []int{0, 1}}},
		GPUHours: int64(2 * (until - from)), Fee: core.Money{Minor: 80_000, Currency: "USD"}, BoughtGPUHours: 16,
		FeePercent: 10, Credited: core.Money{Currency: "USD"}, Price: core.Money{Currency: "USD"}, CreatedAt: hour(0)}
}

// testHandoverSplitsBlock: a block that ends at hour 2 and a new block of
// another team on the same GPUs from hour 2, in one change, is no double
// booking; the new block overlapping the old one's kept hours is.
func testHandoverSplitsBlock(t *testing.T, h Harness) {
	s := h.Open(t)
	b := makeBlock("cb-1").hours(0, 8).state(core.StateActive).on("n1", 0, 1).obj()
	mustCommit(t, s, store.Change{Insert: []core.Block{b}})
	kept := b
	kept.End = hour(2)
	bad := makeBlock("cb-2").team("team-b").hours(1, 8).on("n1", 0, 1).obj()
	err := s.Commit(t.Context(), store.Change{Update: []store.BlockUpdate{{Block: kept, ExpectedVersion: 1}}, Insert: []core.Block{bad}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a received block over the holder's kept hours: %v, want a conflict", err)
	}
	got := makeBlock("cb-2").team("team-b").hours(2, 8).on("n1", 0, 1).obj()
	mustCommit(t, s, store.Change{Update: []store.BlockUpdate{{Block: kept, ExpectedVersion: 1}}, Insert: []core.Block{got},
		Handovers: []store.HandoverWrite{{Handover: store.Handover{ID: "ho-1", Kind: core.HandOverTransfer, BlockID: "cb-1",
			Team: "team-a", ToTeam: "team-b", ToBlockID: "cb-2", GPUModel: "H100", From: hour(2), Until: hour(8),
			Placements: b.Placements, GPUHours: 12, CreatedAt: hour(0)}}}})
	if g, err := s.GetBlock(t.Context(), "cb-1"); err != nil || !g.End.Equal(hour(2)) {
		t.Errorf("the holder's block: %+v, %v; want it to end at hour 2", g, err)
	}
	// The hours after 2 are the receiver's: a third block there conflicts.
	third := makeBlock("cb-3").team("team-c").hours(3, 4).on("n1", 1).obj()
	if err := s.Commit(t.Context(), store.Change{Insert: []core.Block{third}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a block over the received hours: %v, want a conflict", err)
	}
}

// testHandoverWholeBlock: a block cancelled and a block of another team
// on the same GPUs and hours, in one change, is no double booking.
func testHandoverWholeBlock(t *testing.T, h Harness) {
	s := h.Open(t)
	b := makeBlock("cb-1").hours(4, 8).on("n1", 0).obj()
	mustCommit(t, s, store.Change{Insert: []core.Block{b}})
	gone := b
	gone.State = core.StateCancelled
	got := makeBlock("cb-2").team("team-b").hours(4, 8).on("n1", 0).obj()
	mustCommit(t, s, store.Change{Update: []store.BlockUpdate{{Block: gone, ExpectedVersion: 1}}, Insert: []core.Block{got}})
	if g, err := s.GetBlock(t.Context(), "cb-2"); err != nil || g.Team != "team-b" || g.State != core.StateScheduled {
		t.Errorf("the received block: %+v, %v", g, err)
	}
}

func testHandoversRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	tr := store.Handover{ID: "ho-1", Kind: core.HandOverTransfer, BlockID: "cb-1", Team: "team-a", ToTeam: "team-b",
		ToBlockID: "cb-2", GPUModel: "H100", From: hour(2), Until: hour(8), Placements: []core.Placement{{Node: "n1", GPUs: []int{0, 1}}},
		GPUHours: 12, Price: core.Money{Minor: 5_000, Currency: "USD"}, Fee: core.Money{Minor: 80_000, Currency: "USD"},
		BoughtGPUHours: 16, Credited: core.Money{Currency: "USD"}, CreatedAt: hour(1)}
	rel := sampleRelease("ho-2", "cb-3", 0, 4)
	mustCommit(t, s, store.Change{Handovers: []store.HandoverWrite{{Handover: tr}, {Handover: rel}}})
	for _, c := range []struct {
		block string
		want  []store.Handover
	}{{"cb-1", []store.Handover{tr}}, {"cb-2", []store.Handover{tr}}, {"cb-3", []store.Handover{rel}}, {"cb-none", nil}} {
		got, err := s.HandoversOf(t.Context(), c.block)
		if err != nil {
			t.Fatalf("HandoversOf(%s): %v", c.block, err)
		}
		for i := range c.want {
			c.want[i].Version = 1
		}
		if diff := cmp.Diff(c.want, got, cmpOpts...); diff != "" {
			t.Errorf("HandoversOf(%s) (-want +got):\n%s", c.block, diff)
		}
	}
	if err := s.Commit(t.Context(), store.Change{Handovers: []store.HandoverWrite{{Handover: tr}}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a hand-over id twice: %v, want a conflict", err)
	}
	bad := rel
	bad.ID, bad.ResoldGPUHours = "ho-3", bad.GPUHours+1
	if err := s.Commit(t.Context(), store.Change{Handovers: []store.HandoverWrite{{Handover: bad}}}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("more resold than released: %v, want invalid", err)
	}
}

// testHandoverResaleVersions: a resale updates a release at its version;
// a second resale decided on the same version is a conflict and stores
// nothing, ledger included.
func testHandoverResaleVersions(t *testing.T, h Harness) {
	s := h.Open(t)
	rel := sampleRelease("ho-1", "cb-1", 0, 4)
	mustCommit(t, s, store.Change{Handovers: []store.HandoverWrite{{Handover: rel}}})
	sold := rel
	sold.ResoldGPUHours, sold.Credited.Minor = 4, 18_000
	credit := func(id string) core.Journal {
		return core.Payout(id, core.JournalResale, hour(1), "team-a", "cb-1", "", core.Money{Minor: 18_000, Currency: "USD"}, core.Money{},
			core.EscrowAccount("cb-1"), "team-a", core.LedgerCredit)
	}
	mustCommit(t, s, store.Change{Handovers: []store.HandoverWrite{{Handover: sold, ExpectedVersion: 1}}, Journals: []core.Journal{credit("le-1")}})
	err := s.Commit(t.Context(), store.Change{Handovers: []store.HandoverWrite{{Handover: sold, ExpectedVersion: 1}}, Journals: []core.Journal{credit("le-2")}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a resale at a stale version: %v, want a conflict", err)
	}
	got, err := s.HandoversOf(t.Context(), "cb-1")
	if err != nil || len(got) != 1 || got[0].ResoldGPUHours != 4 || got[0].Credited.Minor != 18_000 || got[0].Version != 2 {
		t.Errorf("the release after its resale: %+v, %v; want 4 GPU-hours resold, 180.00 credited, version 2", got, err)
	}
	if l, _ := s.Ledger(t.Context(), "team-a"); len(l) != 1 {
		t.Errorf("ledger has %d entries, want only the first credit", len(l))
	}
}

func testOpenReleases(t *testing.T, h Harness) {
	s := h.Open(t)
	early := sampleRelease("ho-1", "cb-1", 0, 4)
	late := sampleRelease("ho-2", "cb-2", 10, 12)
	sold := sampleRelease("ho-3", "cb-3", 0, 4)
	sold.ResoldGPUHours = sold.GPUHours
	a100 := sampleRelease("ho-4", "cb-4", 0, 4)
	a100.GPUModel = "A100"
	tr := sampleRelease("ho-5", "cb-5", 0, 4)
	tr.Kind, tr.ToTeam, tr.ToBlockID = core.HandOverTransfer, "team-b", "cb-6"
	mustCommit(t, s, store.Change{Handovers: []store.HandoverWrite{{Handover: early}, {Handover: late}, {Handover: sold}, {Handover: a100}, {Handover: tr}}})
	for name, c := range map[string]struct {
		from, to int
		want     []string
	}{
		"meets the first": {3, 5, []string{"ho-1"}},
		"meets both":      {2, 11, []string{"ho-1", "ho-2"}},
		"between":         {4, 10, nil},
		"after":           {12, 20, nil},
	} {
		got, err := s.OpenReleases(t.Context(), "H100", hour(c.from), hour(c.to))
		if err != nil {
			t.Fatalf("OpenReleases: %v", err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if diff := cmp.Diff(c.want, ids); diff != "" {
			t.Errorf("%s: OpenReleases (-want +got):\n%s", name, diff)
		}
	}
}
