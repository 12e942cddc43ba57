package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFleetStats: per GPU model and zone, the GPUs booked in the hour of
// now, those free on healthy nodes and those of unhealthy nodes, and the
// live blocks by state.
func TestFleetStats(t *testing.T) {
	h := newHarness()
	for _, cmd := range []string{
		"add-type name=h100.8x model=H100 gpus=8 price=9832",
		"add-type name=l4.1x model=L4 gpus=1 price=100",
		"add-nodes zone=a rack=r1 model=H100 gpus=8 count=3",
		"add-nodes zone=b rack=r2 model=H100 gpus=8 count=2",
		"add-nodes zone=a rack=l1 model=L4 gpus=4 count=2",
		"reserve id=b1 type=h100.8x count=2 zone=a start=+2 hours=10",
		"reserve id=b2 type=h100.8x count=1 zone=b start=+20 hours=4",
		"reserve id=c1 type=l4.1x count=3 zone=a start=+2 hours=6",
	} {
		h.run(t, cmd)
	}
	// A block that ended is no longer live; one active now.
	b1, _ := h.ix.Block("b1")
	active := *b1
	active.State = StateActive
	if err := h.ix.Add(active); err != nil {
		t.Fatal(err)
	}
	// r1-00 holds b1 at +3h; failing it with no room for a replacement
	// leaves b1 degraded on it: booked and unhealthy both.
	h.run(t, "reserve id=x1 type=h100.8x count=1 zone=a start=+0 hours=24")
	if err := h.ix.SetHealth("r1-00", Unhealthy); err != nil {
		t.Fatal(err)
	}
	pools, blocks := h.ix.FleetStats(h.start.Add(3*time.Hour + 30*time.Minute))
	want := []PoolStats{
		{GPUModel: "H100", Zone: "a", GPUs: 24, Booked: 24, Free: 0, Unhealthy: 8, UnhealthyBooked: 8},
		{GPUModel: "H100", Zone: "b", GPUs: 16, Booked: 0, Free: 16},
		{GPUModel: "L4", Zone: "a", GPUs: 8, Booked: 3, Free: 5},
	}
	if diff := cmp.Diff(want, pools); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	wantBlocks := map[BlockState]int{StateActive: 1, StateScheduled: 3}
	if diff := cmp.Diff(wantBlocks, blocks); diff != "" {
		t.Errorf("blocks by state (-want +got):\n%s", diff)
	}
	// In the first hour only x1 holds GPUs, on a healthy node.
	pools, _ = h.ix.FleetStats(h.start.Add(-time.Hour))
	if pools[0].Booked != 8 || pools[0].Free != 8 || pools[0].Unhealthy != 8 || pools[0].UnhealthyBooked != 0 {
		t.Errorf("H100/a before the blocks: %+v", pools[0])
	}
}
