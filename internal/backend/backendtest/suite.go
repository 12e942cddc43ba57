package backendtest

import (
	"context"
	"testing"
	"time"

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
// activated (cancelled before its start) must succeed. newBackend
// returns a fresh backend for each subtest.
func Exercise(t *testing.T, newBackend func(t *testing.T) backend.Backend) {
	t.Helper()
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
