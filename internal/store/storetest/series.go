package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// seriesOrdersTests check series and standing orders: written by Commit
// (Change.InsertSeries, InsertOrders, UpdateOrders), read by the methods
// of store.SeriesOrders.
var seriesOrdersTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"SeriesRoundTrip", testSeriesRoundTrip},
	{"SeriesAtomic", testSeriesAtomic},
	{"SeriesList", testSeriesList},
	{"OrdersRoundTrip", testOrdersRoundTrip},
	{"OrdersStaleVersion", testOrdersStaleVersion},
	{"OrdersListOldestFirst", testOrdersList},
}

// sampleSeries is a series of team with two occurrences of 1 GPU on
// node, over hours [0, 8) and [24, 32), listed last first.
func sampleSeries(id, team, node string) core.Series {
	o1 := makeBlock(id+"-o1").team(team).on(node, 0).hours(0, 8).obj()
	o2 := makeBlock(id+"-o2").team(team).on(node, 0).hours(24, 32).obj()
	return core.Series{ID: id, Name: "series " + id, Team: team, InstanceType: o1.InstanceType, Count: 1, Zone: o1.Zone,
		Schedule: core.Schedule{Days: []time.Weekday{time.Monday, time.Tuesday}, StartLocal: "01:00", EndLocal: "09:00",
			TimeZone: "Europe/Madrid", From: "2030-01-07", To: "2030-01-08"},
		Fee: core.Money{Minor: o1.Fee.Minor + o2.Fee.Minor, Currency: "USD"}, CreatedAt: hour(-2),
		Occurrences: []core.Block{o2, o1}}
}

func wantSeries(t *testing.T, s store.Full, want core.Series) {
	t.Helper()
	got, err := s.Series(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("Series(%s): %v", want.ID, err)
	}
	var occ []core.Block
	for _, b := range want.Occurrences {
		occ = append(occ, withVersion(b, 1))
	}
	core.SortSegments(occ)
	want.Occurrences = occ
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("Series(%s) mismatch (-want +got):\n%s", want.ID, diff)
	}
}

func testSeriesRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	sr := sampleSeries("cs-1", "team-a", "n1")
	alone := makeBlock("alone").on("n2", 0).obj()
	mustCommit(t, s, store.Change{Insert: append(append([]core.Block{}, sr.Occurrences...), alone), InsertSeries: []core.Series{sr}})
	wantSeries(t, s, sr)
	if _, err := s.Series(t.Context(), "cs-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Series(cs-none): got %v, want ErrNotFound", err)
	}
	// A duplicate id is a conflict and stores nothing.
	again := sampleSeries("cs-1", "team-a", "n3")
	for i := range again.Occurrences {
		again.Occurrences[i].ID += "-again"
	}
	wantConflict(t, s, store.Change{Insert: again.Occurrences, InsertSeries: []core.Series{again}})
	if _, err := s.GetBlock(t.Context(), again.Occurrences[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an occurrence of a refused series was stored: %v", err)
	}
}

// testSeriesAtomic: a series whose occurrence overlaps a live block is
// refused whole.
func testSeriesAtomic(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, insert(makeBlock("taken").on("n1", 0).hours(24, 26).obj()))
	sr := sampleSeries("cs-1", "team-a", "n1")
	wantConflict(t, s, store.Change{Insert: sr.Occurrences, InsertSeries: []core.Series{sr}})
	if _, err := s.Series(t.Context(), "cs-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Series after a refused commit: %v, want ErrNotFound", err)
	}
	if err := s.Commit(t.Context(), store.Change{InsertSeries: []core.Series{{ID: "cs-2", Team: "team-a"}}}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("a series without occurrences: got %v, want ErrInvalidArgument", err)
	}
}

func testSeriesList(t *testing.T, h Harness) {
	s := h.Open(t)
	a1, b1, a2 := sampleSeries("cs-a1", "team-a", "n1"), sampleSeries("cs-b1", "team-b", "n2"), sampleSeries("cs-a2", "team-a", "n3")
	a2.CreatedAt = hour(-1)
	var blocks []core.Block
	for _, sr := range []core.Series{a1, b1, a2} {
		blocks = append(blocks, sr.Occurrences...)
	}
	mustCommit(t, s, store.Change{Insert: blocks, InsertSeries: []core.Series{a2, b1, a1}})
	got, err := s.ListSeries(t.Context(), "team-a")
	if err != nil {
		t.Fatalf("ListSeries: %v", err)
	}
	var ids []string
	for _, sr := range got {
		ids = append(ids, sr.ID)
		if len(sr.Occurrences) != 2 || sr.Occurrences[0].Start.After(sr.Occurrences[1].Start) {
			t.Errorf("series %s: occurrences %+v, want 2 in time order", sr.ID, sr.Occurrences)
		}
	}
	if diff := cmp.Diff([]string{"cs-a1", "cs-a2"}, ids); diff != "" {
		t.Errorf("ListSeries(team-a) (-want +got):\n%s", diff)
	}
	all, err := s.ListSeries(t.Context(), "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ListSeries(\"\"): %d series, %v; want 3", len(all), err)
	}
}

func sampleOrder(id, team string, created time.Time) core.Order {
	return core.Order{ID: id, Name: "order " + id, Team: team, Mode: core.OrderBuy, InstanceType: "h100.8x", Count: 2,
		Zone: "zone-a", Duration: 8 * time.Hour, StartAfter: hour(1), EndBefore: hour(48), Deadline: hour(40),
		MaxFee: core.Money{Minor: 500000, Currency: "USD"}, State: core.OrderOpen, CreatedAt: created, UpdatedAt: created}
}

func testOrdersRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	o := sampleOrder("ord-1", "team-a", hour(0))
	c := store.Change{InsertOrders: []core.Order{o}, Events: []core.Event{{ID: "evt-o1", Time: hour(0), Type: core.EventOrderCreated, Subject: o.ID, Team: o.Team}}}
	mustCommit(t, s, c)
	if c.InsertOrders[0].Version != 1 {
		t.Errorf("inserted order's version %d, want 1", c.InsertOrders[0].Version)
	}
	o.Version = 1
	got, err := s.Order(t.Context(), o.ID)
	if err != nil {
		t.Fatalf("Order: %v", err)
	}
	if diff := cmp.Diff(o, got, cmpOpts...); diff != "" {
		t.Errorf("Order mismatch (-want +got):\n%s", diff)
	}
	bought := o
	bought.State, bought.BlockID, bought.Reason, bought.UpdatedAt = core.OrderBought, "cb-1", "", hour(2)
	u := store.Change{UpdateOrders: []store.OrderUpdate{{Order: bought, ExpectedVersion: 1}}}
	mustCommit(t, s, u)
	bought.Version = 2
	if got, err = s.Order(t.Context(), o.ID); err != nil || !cmp.Equal(bought, got, cmpOpts...) {
		t.Errorf("Order after update: %v\n%s", err, cmp.Diff(bought, got, cmpOpts...))
	}
	if _, err := s.Order(t.Context(), "ord-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Order(ord-none): got %v, want ErrNotFound", err)
	}
	wantConflict(t, s, store.Change{InsertOrders: []core.Order{o}})
}

// testOrdersStaleVersion: an update from a version that moved is a
// conflict, and the change's other writes are not stored.
func testOrdersStaleVersion(t *testing.T, h Harness) {
	s := h.Open(t)
	o := sampleOrder("ord-1", "team-a", hour(0))
	mustCommit(t, s, store.Change{InsertOrders: []core.Order{o}})
	cancelled := o
	cancelled.State = core.OrderCancelled
	mustCommit(t, s, store.Change{UpdateOrders: []store.OrderUpdate{{Order: cancelled, ExpectedVersion: 1}}})
	bought := o
	bought.State, bought.BlockID = core.OrderBought, "cb-late"
	wantConflict(t, s, store.Change{Insert: []core.Block{makeBlock("cb-late").on("n1", 0).obj()},
		UpdateOrders: []store.OrderUpdate{{Order: bought, ExpectedVersion: 1}}})
	if _, err := s.GetBlock(t.Context(), "cb-late"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the block of a refused change was stored: %v", err)
	}
	if got, _ := s.Order(t.Context(), o.ID); got.State != core.OrderCancelled {
		t.Fatalf("order state %s, want cancelled", got.State)
	}
}

func testOrdersList(t *testing.T, h Harness) {
	s := h.Open(t)
	late := sampleOrder("ord-a", "team-a", hour(3))
	early := sampleOrder("ord-z", "team-b", hour(1))
	mid := sampleOrder("ord-m", "team-a", hour(2))
	mid.State = core.OrderExpired
	mustCommit(t, s, store.Change{InsertOrders: []core.Order{late, early, mid}})
	ids := func(team string, state core.OrderState) []string {
		got, err := s.ListOrders(t.Context(), team, state)
		if err != nil {
			t.Fatalf("ListOrders: %v", err)
		}
		var out []string
		for _, o := range got {
			out = append(out, o.ID)
		}
		return out
	}
	for _, tc := range []struct {
		team  string
		state core.OrderState
		want  []string
	}{
		{"", "", []string{"ord-z", "ord-m", "ord-a"}},
		{"", core.OrderOpen, []string{"ord-z", "ord-a"}},
		{"team-a", "", []string{"ord-m", "ord-a"}},
		{"team-a", core.OrderExpired, []string{"ord-m"}},
	} {
		if diff := cmp.Diff(tc.want, ids(tc.team, tc.state), cmpOpts...); diff != "" {
			t.Errorf("ListOrders(%q, %q) (-want +got):\n%s", tc.team, tc.state, diff)
		}
	}
}
