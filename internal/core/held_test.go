package core

import (
	"testing"
	"time"
)

// TestHeld counts the most instances a team holds at once: only its own
// live blocks, of the asked type, over the asked window, and never a
// block after it was removed or stopped being live.
func TestHeld(t *testing.T) {
	f := packingFleet(16, 2)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ix, err := NewIndex(&f, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h int) time.Time { return now.Add(time.Duration(h) * time.Hour) }
	node := 0
	add := func(id, team, typ string, count, from, to int) {
		t.Helper()
		var ps []Placement
		for range count {
			ps = append(ps, Placement{Node: f.Nodes[node].Name, GPUs: []int{0}})
			node++
		}
		b := Block{ID: id, Team: team, InstanceType: typ, Count: count, Zone: "z", State: StateScheduled,
			Start: at(from), End: at(to), Placements: ps}
		if err := ix.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	add("a1", "a", "t1", 2, 10, 20)
	add("a2", "a", "t1", 3, 15, 25)
	add("a3", "a", "t2", 1, 15, 16)
	add("a4", "a", "t1", 4, 25, 30) // starts as a2 ends: never at once
	add("b1", "b", "t1", 5, 10, 30)

	tests := []struct {
		team, typ string
		from, to  int
		want      int
	}{
		{"a", "", 0, 40, 6},    // a1 + a2 + a3 over [15, 16)
		{"a", "t1", 0, 40, 5},  // a1 + a2
		{"a", "t1", 20, 40, 4}, // a1 has ended; a2 then a4
		{"a", "t1", 0, 15, 2},  // a2 starts as the window ends
		{"b", "", 0, 40, 5},    //
		{"c", "", 0, 40, 0},    // holds nothing
		{"a", "t2", 16, 40, 0}, // a3 has ended
		{"a", "", 30, 40, 0},   // all have ended
		{"b", "t2", 0, 40, 0},  // none of that type
		{"a", "t1", 24, 26, 4}, // a2's last hour, then a4's first
	}
	check := func(when string) {
		t.Helper()
		for _, tc := range tests {
			if got := ix.Held(tc.team, tc.typ, at(tc.from), at(tc.to)); got != tc.want {
				t.Errorf("%s: Held(%s, %q, %d, %d) = %d, want %d", when, tc.team, tc.typ, tc.from, tc.to, got, tc.want)
			}
		}
	}
	check("after adding")
	// A window off the hour: [19:30, 20:30) sees a1 and a2 until 20:00.
	if got := ix.Held("a", "t1", at(19).Add(30*time.Minute), at(20).Add(30*time.Minute)); got != 5 {
		t.Errorf("Held over [19:30, 20:30) = %d, want 5", got)
	}
	if got := ix.Held("a", "t1", at(20).Add(30*time.Minute), at(21)); got != 3 {
		t.Errorf("Held over [20:30, 21:00) = %d, want 3", got)
	}

	// a2 removed and a3 no longer live: team a holds less, team b the same.
	ix.Remove("a2")
	a3, _ := ix.Block("a3")
	cancelled := *a3
	cancelled.State = StateCancelled
	if err := ix.Add(cancelled); err != nil {
		t.Fatal(err)
	}
	tests = []struct {
		team, typ string
		from, to  int
		want      int
	}{
		{"a", "", 0, 40, 4},
		{"a", "t1", 0, 25, 2},
		{"a", "t2", 0, 40, 0},
		{"b", "", 0, 40, 5},
	}
	check("after removing a2 and cancelling a3")

	// The quota check counts holdings only when the quota limits them.
	q := Quota{MaxInstancesHeld: 5}
	if err := ix.CheckQuota("b", q, 1, at(10), at(11), now); err == nil {
		t.Errorf("CheckQuota: team b holding 5 of 5 may buy another")
	}
	if err := ix.CheckQuota("a", q, 1, at(10), at(11), now); err != nil {
		t.Errorf("CheckQuota: team a holding 2 of 5: %v", err)
	}
	if err := ix.CheckQuota("b", Quota{}, 100, at(10), at(11), now); err != nil {
		t.Errorf("CheckQuota without limits: %v", err)
	}
}
