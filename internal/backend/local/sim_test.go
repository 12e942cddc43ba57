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
