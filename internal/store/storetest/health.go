package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// healthTests check the nodes' health: written by Commit
// (Change.NodeHealth), read by store.Health.
var healthTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"NodeHealth", testNodeHealth},
	{"NodeHealthRolledBack", testNodeHealthRolledBack},
	{"NodeHealthInvalid", testNodeHealthInvalid},
	{"NodeHealthReopen", testNodeHealthReopen},
}

// wantHealth fails the test unless NodeHealth returns want.
func wantHealth(t *testing.T, s store.Full, want ...core.NodeHealth) {
	t.Helper()
	got, err := s.NodeHealth(t.Context())
	mustDo(t, "NodeHealth", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("NodeHealth (-want +got):\n%s", diff)
	}
}

func unhealthy(node, reason string, since time.Time, source core.HealthSource) core.NodeHealth {
	return core.NodeHealth{Node: node, Health: core.Unhealthy, Reason: reason, Since: since, Source: source}
}

// testNodeHealth: records are stored with the change, replace the node's
// earlier one, and read back by node.
func testNodeHealth(t *testing.T, h Harness) {
	s := h.Open(t)
	wantHealth(t, s) // no record: every node is healthy
	n2 := unhealthy("n2", "GPU 3: XID 79", hour(1).Add(250*time.Millisecond), core.HealthFromEngine)
	n1 := unhealthy("n1", "drained", hour(1), core.HealthFromAdmin)
	// A node's failure and the block it moves commit together.
	mustCommit(t, s, insert(makeBlock("b1").on("n2", 0).obj()))
	moved := withVersion(makeBlock("b1").on("n3", 0).obj(), 1)
	mustCommit(t, s, store.Change{Update: []store.BlockUpdate{{Block: moved, ExpectedVersion: 1, Replace: true}},
		NodeHealth: []core.NodeHealth{n2, n1}})
	wantHealth(t, s, n1, n2)
	wantBlock(t, s, withVersion(moved, 2))

	recovered := core.NodeHealth{Node: "n2", Health: core.Healthy, Since: hour(2), Source: core.HealthFromAdmin}
	mustCommit(t, s, store.Change{NodeHealth: []core.NodeHealth{recovered}})
	wantHealth(t, s, n1, recovered)
}

// testNodeHealthRolledBack: a change that fails stores none of its
// health records.
func testNodeHealthRolledBack(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, insert(makeBlock("b1").on("n1", 0).obj()))
	c := insert(makeBlock("b2").on("n1", 0).obj())
	c.NodeHealth = []core.NodeHealth{unhealthy("n1", "XID 48", hour(0), core.HealthFromEngine)}
	wantConflict(t, s, c)
	wantHealth(t, s)
}

func testNodeHealthInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	ok := unhealthy("n1", "XID 48", hour(0), core.HealthFromEngine)
	tests := map[string][]core.NodeHealth{
		"no node":        {{Health: core.Unhealthy, Since: hour(0), Source: core.HealthFromEngine}},
		"unknown health": {{Node: "n1", Health: "sick", Since: hour(0), Source: core.HealthFromEngine}},
		"unknown source": {{Node: "n1", Health: core.Unhealthy, Since: hour(0), Source: "nvml"}},
		"node twice":     {ok, ok},
	}
	for name, hs := range tests {
		t.Run(name, func(t *testing.T) {
			err := s.Commit(t.Context(), store.Change{NodeHealth: hs})
			wantErr(t, "Commit", err, core.ErrInvalidArgument)
			wantHealth(t, s)
		})
	}
}

func testNodeHealthReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	n1 := unhealthy("n1", "XID 48", hour(0).Add(time.Microsecond), core.HealthFromEngine)
	mustCommit(t, s, store.Change{NodeHealth: []core.NodeHealth{n1}})
	s = h.Reopen(t, s)
	wantHealth(t, s, n1)
}
