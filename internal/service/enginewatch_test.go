package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
)

// changingEngine is an engine whose nodes and health a test changes while
// the service runs.
type changingEngine struct {
	mu     sync.Mutex
	nodes  []core.Node
	failed map[string]string // node → reason
}

func (e *changingEngine) Name() string { return "changing" }

func (e *changingEngine) Inventory(context.Context) ([]core.Node, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.nodes), nil
}

func (e *changingEngine) NodeHealth(context.Context) ([]core.NodeHealth, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []core.NodeHealth
	for n, why := range e.failed {
		out = append(out, core.NodeHealth{Node: n, Health: core.Unhealthy, Reason: why})
	}
	return out, nil
}

func (e *changingEngine) set(nodes []core.Node, failed map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodes, e.failed = nodes, failed
}

func (*changingEngine) Activate(context.Context, core.Block) error  { return nil }
func (*changingEngine) Terminate(context.Context, core.Block) error { return nil }
func (*changingEngine) Release(context.Context, core.Block) error   { return nil }

// TestEngineWatch: while the service runs, a node the engine says failed
// is recorded unhealthy from the engine with its reason, and its block
// moves to another node; the engine's word that it is healthy again
// recovers it. An admin's fail stands whatever the engine says. A node
// that leaves the inventory is unhealthy, and healthy once it is back.
func TestEngineWatch(t *testing.T) {
	ctx := t.Context()
	f := healthFleet()
	st := openHealthStore(t, filepath.Join(t.TempDir(), "watch.db"), healthBlock("cb-1", "h100.8x", "n1", 0, 1, 2, 3, 4, 5, 6, 7))
	t.Cleanup(func() { st.Close() })
	engine := &changingEngine{nodes: f.Nodes}
	svc, err := New(ctx, Config{Fleet: f, Store: st, Backend: engine, Clock: clock.NewSim(healthT0),
		Log: slog.New(slog.DiscardHandler), EnginePoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runService(t, svc)
	record := func(node string) core.NodeHealth {
		for _, n := range svc.Nodes() {
			if n.Node.Name == node {
				return n.Record
			}
		}
		t.Fatalf("node %s is not in the fleet", node)
		return core.NodeHealth{}
	}
	becomes := func(what, node string, want core.Health, source core.HealthSource, reason string) {
		t.Helper()
		waitFor(t, 10*time.Second, what, func() bool {
			r := record(node)
			return r.Health == want && r.Source == source && r.Reason == reason
		})
	}

	// 1. The engine fails n1: the block moves off it.
	engine.set(f.Nodes, map[string]string{"n1": "NotReady: kubelet stopped posting status"})
	becomes("n1 failed by the engine", "n1", core.Unhealthy, core.HealthFromEngine, "NotReady: kubelet stopped posting status")
	b, err := st.GetBlock(ctx, "cb-1")
	if err != nil || len(b.Placements) != 1 || b.Placements[0].Node == "n1" {
		t.Errorf("cb-1 after n1 failed: %+v, %v; want it moved to another node", b.Placements, err)
	}

	// 2. The engine says n1 is healthy again.
	engine.set(f.Nodes, nil)
	becomes("n1 recovered by the engine", "n1", core.Healthy, core.HealthFromEngine, "")

	// 3. An admin's fail stands while the engine says healthy.
	if _, err := svc.SetNodeHealth(ctx, core.NodeHealth{Node: "n2", Health: core.Unhealthy, Reason: "drained by ops", Source: core.HealthFromAdmin}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // ten polls
	if r := record("n2"); r.Health != core.Unhealthy || r.Source != core.HealthFromAdmin {
		t.Errorf("n2 after the engine's polls: %+v; want the admin's fail", r)
	}

	// 4. n0 leaves the inventory, then comes back.
	engine.set(f.Nodes[1:], nil)
	becomes("n0 missing from the inventory", "n0", core.Unhealthy, core.HealthFromEngine, missingReason)
	engine.set(f.Nodes, nil)
	becomes("n0 back in the inventory", "n0", core.Healthy, core.HealthFromEngine, "")
}
