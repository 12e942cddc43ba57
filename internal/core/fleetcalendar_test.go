package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFleetCalendar(t *testing.T) {
	own := makeBlock("own").whole("n1").hours(2, 4).obj()
	other := makeBlock("other").team("t2").on("n2", 0, 1, 2).hours(3, 5).obj()
	ix := newTestIndex(t, own, other)
	if err := ix.SetHealth("n4", Unhealthy); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		team       string
		from       time.Time
		wantFree   []int32
		wantOwn    []int32
		wantTaken  []int32
		wantBlocks []string
	}{
		// 32 GPUs, n4's 8 unhealthy: 24 to book when nothing is booked.
		"a member sees others only as counts": {team: "t1", from: at(1),
			wantFree:   []int32{24, 16, 13, 21, 24},
			wantOwn:    []int32{0, 8, 8, 0, 0},
			wantTaken:  []int32{0, 0, 3, 3, 0},
			wantBlocks: []string{"own"}},
		"an administrator holds every block": {team: "", from: at(1),
			wantFree:   []int32{24, 16, 13, 21, 24},
			wantOwn:    []int32{0, 8, 11, 3, 0},
			wantTaken:  []int32{0, 0, 0, 0, 0},
			wantBlocks: []string{"own", "other"}},
		"the past has nothing free": {team: "t2", from: at(-2),
			wantFree:   []int32{0, 0, 24, 24, 16},
			wantOwn:    []int32{0, 0, 0, 0, 0},
			wantTaken:  []int32{0, 0, 0, 0, 8},
			wantBlocks: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ix.FleetCalendar(tc.team, tc.from, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d pools, want 1", len(got))
			}
			c := got[0]
			var ids []string
			for _, b := range c.Blocks {
				ids = append(ids, b.ID)
			}
			if diff := cmp.Diff([][]int32{tc.wantFree, tc.wantOwn, tc.wantTaken}, [][]int32{c.Free, c.Own, c.Taken}); diff != "" {
				t.Errorf("free, own, taken (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBlocks, ids); diff != "" {
				t.Errorf("blocks (-want +got):\n%s", diff)
			}
			if len(c.Unhealthy) != 1 || c.Unhealthy[0].Name != "n4" || c.GPUs != 32 || c.Nodes != 4 {
				t.Errorf("pool = %d nodes, %d GPUs, unhealthy %v; want 4, 32, [n4]", c.Nodes, c.GPUs, c.Unhealthy)
			}
		})
	}
}

func TestFleetCalendarRefusesSpans(t *testing.T) {
	ix := newTestIndex(t)
	for _, hours := range []int{0, MaxCalendarHours + 1} {
		if _, err := ix.FleetCalendar("t1", at(0), hours); err == nil {
			t.Errorf("FleetCalendar(%d hours) = nil error, want invalid", hours)
		}
	}
}
