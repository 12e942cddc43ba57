package kubernetes_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/kubetest"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// TestService runs the service over SQLite on the backend: its nodes
// are the cluster's; a block that becomes active labels its node; a node
// cordoned is recorded unhealthy by the engine watch, and the block
// moves to another node, its label with it.
func TestService(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	nodes, err := c.AddGPUNodes(ctx, 3, 8, "zone-a", map[string]string{kubernetes.DefaultRackLabel: "a-r1"})
	if err != nil {
		t.Fatal(err)
	}
	be := c.newBackend(t, kubernetes.Config{})

	// 1. A block stored before the start, on the first node, from one
	// hour on.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	blk := core.Block{ID: "cb-svc", Team: "team-a", InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "zone-a",
		Start: t0.Add(time.Hour), End: t0.Add(5 * time.Hour), State: core.StateScheduled, CreatedAt: t0,
		Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: nodes[0], GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{blk}}); err != nil {
		t.Fatal(err)
	}
	sim := clock.NewSim(t0)
	svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: be, Clock: sim,
		Log: slog.New(slog.DiscardHandler), EnginePoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	// 2. The fleet's nodes are the cluster's.
	var got []string
	for _, n := range svc.Fleet().Nodes {
		got = append(got, n.Name)
	}
	if diff := cmp.Diff(nodes, got); diff != "" {
		t.Fatalf("the service's nodes (-cluster +service):\n%s", diff)
	}

	// 3. The block's start labels its node.
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); svc.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	key := kubernetes.DefaultBlockLabelDomain + "/cb-svc"
	kubetest.Eventually(t, "the block's node is labelled", func() (bool, error) {
		return cmp.Equal(c.labelled(t, key), map[string]string{nodes[0]: "team-a"}), nil
	})

	// 4. Its node cordoned: unhealthy from the engine, the block moved.
	c.cordon(t, nodes[0], true)
	kubetest.Eventually(t, "the block's label moved off the cordoned node", func() (bool, error) {
		l := c.labelled(t, key)
		return len(l) == 1 && l[nodes[0]] == "" && slices.Contains(nodes[1:], firstKey(l)), nil
	})
	for _, v := range svc.Nodes() {
		if v.Node.Name == nodes[0] && (v.Record.Health != core.Unhealthy || v.Record.Reason != "cordoned" || v.Record.Source != core.HealthFromEngine) {
			t.Errorf("the cordoned node's record: %+v, want unhealthy from the engine, cordoned", v.Record)
		}
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}
