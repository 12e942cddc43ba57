package local_test

import (
	"context"
	"log/slog"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/backend/local"
	"capblock/internal/core"
	"capblock/internal/fleet"
)

func TestSim(t *testing.T) {
	backendtest.Exercise(t, func(*testing.T) backend.Backend {
		return local.NewSim(slog.New(slog.DiscardHandler), fleet.Demo().Nodes)
	})
}

// TestSimInventory: the sim reports the nodes of the fleet file it was
// built from, healthy, and neither its builder nor a caller of
// Inventory changes them afterwards.
func TestSimInventory(t *testing.T) {
	f, err := fleet.Load("../../fleet/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := f.Nodes
	nodes := make([]core.Node, len(f.Nodes))
	for i, n := range f.Nodes {
		n.Labels = maps.Clone(n.Labels)
		nodes[i] = n
	}
	sim := local.NewSim(slog.New(slog.DiscardHandler), nodes)
	nodes[0].Name, nodes[0].GPUs = "changed", 1
	for i := range nodes {
		if nodes[i].Labels != nil {
			nodes[i].Labels["changed"] = "yes"
			break
		}
	}
	got, err := sim.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inventory (-fleet file +sim):\n%s", diff)
	}
	for i := range got {
		got[i].GPUs = 0
		if got[i].Labels != nil {
			got[i].Labels["changed"] = "yes"
		}
	}
	again, _ := sim.Inventory(context.Background())
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("inventory after the caller changed its copy (-fleet file +sim):\n%s", diff)
	}
}

// TestSimFence: a write of a block older than the last one the sim took
// (an older version, or the same version and an earlier step of the
// block's life) is refused and counted, and answered as done; the
// release's record stays, so that a late activation finds it.
func TestSimFence(t *testing.T) {
	type write struct {
		kind    core.ActionKind
		version int64
	}
	tests := map[string]struct {
		writes    []write
		want      string // what the sim holds at the end
		wantStale int64
	}{
		"in order": {writes: []write{{core.ActionActivate, 2}, {core.ActionTerminate, 3}, {core.ActionRelease, 4}}, want: ""},
		"each twice": {writes: []write{{core.ActionActivate, 2}, {core.ActionActivate, 2},
			{core.ActionRelease, 3}, {core.ActionRelease, 3}}, want: ""},
		"an older activation after a release": {writes: []write{{core.ActionActivate, 2}, {core.ActionRelease, 3},
			{core.ActionActivate, 2}}, want: "", wantStale: 1},
		"an activation after a release of its version": {writes: []write{{core.ActionActivate, 2}, {core.ActionTerminate, 2},
			{core.ActionRelease, 2}, {core.ActionActivate, 2}, {core.ActionTerminate, 2}}, want: "", wantStale: 2},
		"an older termination after a new activation": {writes: []write{{core.ActionTerminate, 3}, {core.ActionActivate, 4},
			{core.ActionTerminate, 3}}, want: "active", wantStale: 1},
		"a newer activation after a release": {writes: []write{{core.ActionRelease, 3}, {core.ActionActivate, 4}}, want: "active"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sim := local.NewSim(slog.New(slog.DiscardHandler), fleet.Demo().Nodes)
			b := core.Block{ID: "cb-1", Team: "t", InstanceType: "h100.8x", Count: 1}
			for _, w := range tc.writes {
				b.Version = w.version
				a := core.Action{ID: "ac", Kind: w.kind, Subject: b.ID, Team: b.Team, Payload: backend.EncodeBlock(b)}
				if err := backend.Apply(context.Background(), sim, a); err != nil {
					t.Fatalf("%s of version %d: %v", w.kind, w.version, err)
				}
			}
			if got := sim.State(b.ID); got != tc.want {
				t.Errorf("the sim holds %q, want %q", got, tc.want)
			}
			if got := sim.StaleWrites(); got != tc.wantStale {
				t.Errorf("%d stale writes refused, want %d", got, tc.wantStale)
			}
		})
	}
}
