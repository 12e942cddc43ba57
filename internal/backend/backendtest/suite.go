package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// Holder is the optional part of the suite: a backend that can say what
// it holds for a block ("active", "terminating", or "" for nothing) is
// checked on that too.
type Holder interface {
	State(blockID string) string
}

// Exercise runs the suite that every backend passes: the outbox worker
// applies an action again after a crash, so each call taken twice must
// leave what it left once, and a release of a block that was never
// activated (cancelled before its start) must succeed. Its inventory
// names at least one node, each once, with a GPU model and GPUs, and
// is the same when asked again. newBackend returns a fresh backend for
// each subtest.
func Exercise(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	t.Helper()
	t.Run("inventory", func(t *testing.T) {
		t.Parallel()
		checkInventory(t, newBackend(t))
	})
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	blk := func(id string) core.Block {
		return core.Block{ID: id, Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "z",
			Start: t0, End: t0.Add(4 * time.Hour), State: core.StateActive,
			Placements: []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	}
	type step struct {
		kind core.ActionKind
		want string // what a Holder holds after it
	}
	tests := map[string]struct {
		steps []step
	}{
		"a block's life": {steps: []step{
			{core.ActionActivate, "active"}, {core.ActionTerminate, "terminating"}, {core.ActionRelease, ""}}},
		"each step twice": {steps: []step{
			{core.ActionActivate, "active"}, {core.ActionActivate, "active"},
			{core.ActionTerminate, "terminating"}, {core.ActionTerminate, "terminating"},
			{core.ActionRelease, ""}, {core.ActionRelease, ""}}},
		"released before its start": {steps: []step{{core.ActionRelease, ""}, {core.ActionRelease, ""}}},
		"released while active":     {steps: []step{{core.ActionActivate, "active"}, {core.ActionRelease, ""}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			be := newBackend(t)
			b := blk("cb-" + name)
			for i, st := range tc.steps {
				a := core.Action{ID: "ac-" + string(rune('a'+i)), Kind: st.kind, Subject: b.ID, Team: b.Team, Payload: backend.EncodeBlock(b)}
				if err := backend.Apply(context.Background(), be, a); err != nil {
					t.Fatalf("step %d, %s: %v", i+1, st.kind, err)
				}
				if h, ok := be.(Holder); ok {
					if got := h.State(b.ID); got != st.want {
						t.Errorf("after step %d, %s: the backend holds %q, want %q", i+1, st.kind, got, st.want)
					}
				}
			}
		})
	}
}

// checkInventory checks what every backend's inventory holds: some
// nodes, each named once, of a GPU model, with GPUs; and the same nodes
// when asked twice (Inventory is idempotent too).
func checkInventory(t *testing.T, be backend.Backend) {
	t.Helper()
	nodes, err := be.Inventory(context.Background())
	if err != nil {
		t.Fatalf("Inventory: %v", err)
	}
	if len(nodes) == 0 {
		t.Fatal("the inventory reports no node")
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		switch {
		case n.Name == "":
			t.Errorf("node #%d has no name", i+1)
		case seen[n.Name]:
			t.Errorf("node %s is reported twice", n.Name)
		}
		seen[n.Name] = true
		if n.GPUs < 1 {
			t.Errorf("node %s has %d GPUs, want 1 or more", n.Name, n.GPUs)
		}
		if n.GPUModel == "" {
			t.Errorf("node %s has no GPU model", n.Name)
		}
	}
	again, err := be.Inventory(context.Background())
	if err != nil {
		t.Fatalf("Inventory again: %v", err)
	}
	if diff := cmp.Diff(nodes, again); diff != "" {
		t.Errorf("the inventory asked again (-first +second):\n%s", diff)
	}
}
