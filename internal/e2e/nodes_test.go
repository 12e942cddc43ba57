package e2e

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type blockStatus struct {
	TotalCapacity       int  `json:"totalCapacity"`
	AvailableCapacity   int  `json:"availableCapacity"`
	UnavailableCapacity int  `json:"unavailableCapacity"`
	Degraded            bool `json:"degraded"`
	Placements          []struct {
		Node string `json:"node"`
		GPUs []int  `json:"gpus"`
	} `json:"placements"`
}

type nodeReport struct {
	Replaced, Degraded, Recovered []string
}

// TestNodeFailure: a node of an active block fails and the block gets a
// replacement node, keeping its id; when no spare is left, the next
// failure leaves it degraded, and the recovery makes it whole; events say
// each of these.
func TestNodeFailure(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	// A 2-node block, and 5 more nodes taken: 1 of the 8 H100 nodes spare.
	b, _ := e.buy(e.exact(searchQuery("h100.8x", 2, 8, s, s.Add(8*time.Hour)), 8, s).OfferingID, "fail-1")
	e.buy(e.exact(searchQuery("h100.8x", 5, 8, s, s.Add(8*time.Hour)), 8, s).OfferingID, "fail-2")
	e.advance(2 * time.Hour)
	status := func() blockStatus {
		var st blockStatus
		if code := call(t, e.url, "GET", "/v1/blocks/"+b.ID+"/status", nil, &st); code != 200 {
			t.Fatalf("status: %d", code)
		}
		return st
	}
	before := status()
	if before.AvailableCapacity != 2 || before.Degraded || len(before.Placements) != 2 {
		t.Fatalf("active block before the failure: %+v", before)
	}
	// 1. The first failure is replaced from the spare node.
	failed := before.Placements[0].Node
	var rep nodeReport
	if code := call(t, e.url, "POST", "/v1/admin/nodes/"+failed+"/fail", nil, &rep); code != 200 {
		t.Fatalf("fail %s: %d", failed, code)
	}
	if diff := cmp.Diff([]string{b.ID}, rep.Replaced); diff != "" {
		t.Fatalf("replaced (-want +got):\n%s", diff)
	}
	after := status()
	if after.AvailableCapacity != 2 || after.Degraded || len(after.Placements) != 2 {
		t.Fatalf("after a replacement: %+v", after)
	}
	for _, p := range after.Placements {
		if p.Node == failed {
			t.Fatalf("the block still holds the failed node %s", failed)
		}
	}
	// 2. No spare left: the next failure degrades it.
	second := after.Placements[1].Node
	if code := call(t, e.url, "POST", "/v1/admin/nodes/"+second+"/fail", nil, &rep); code != 200 || len(rep.Degraded) != 1 {
		t.Fatalf("fail %s: %d %+v", second, code, rep)
	}
	if st := status(); !st.Degraded || st.UnavailableCapacity != 1 || st.AvailableCapacity != 1 {
		t.Fatalf("after a failure with no spare: %+v", st)
	}
	// 3. Recovery makes it whole.
	if code := call(t, e.url, "POST", "/v1/admin/nodes/"+second+"/recover", nil, &rep); code != 200 || len(rep.Recovered) != 1 {
		t.Fatalf("recover %s: %d %+v", second, code, rep)
	}
	if st := status(); st.Degraded || st.AvailableCapacity != 2 {
		t.Fatalf("after the recovery: %+v", st)
	}
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == b.ID {
			types = append(types, ev.Type)
		}
	}
	want := []string{"block.purchased", "block.scheduled", "block.active", "block.node-replaced", "block.degraded", "block.recovered"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/admin/nodes/no-such-node/fail", nil, &p); code != 404 || p.Code != "not_found" {
		t.Errorf("unknown node: %d %s", code, p.Code)
	}
}
