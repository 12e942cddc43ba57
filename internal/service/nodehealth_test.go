package service

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

var healthT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// healthFleet is three 8-GPU H100 nodes of one pool, n0 to n2, sold
// whole (h100.8x) or by the GPU (h100.1x).
func healthFleet() core.Fleet {
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{
			{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}},
			{Name: "h100.1x", GPUModel: "H100", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 1229, Currency: "USD"}},
		}}
	for _, n := range []string{"n0", "n1", "n2"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	return f
}

// healthBlock is a scheduled block of type typ on the given GPUs of a
// node, from hour 2 to hour 10 after healthT0.
func healthBlock(id, typ, node string, gpus ...int) core.Block {
	return core.Block{ID: id, Team: "t", InstanceType: typ, GPUModel: "H100", Count: 1, Zone: "z",
		Start: healthT0.Add(2 * time.Hour), End: healthT0.Add(10 * time.Hour), State: core.StateScheduled, CreatedAt: healthT0,
		Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: node, GPUs: gpus}}}
}

// openHealthStore opens (or reopens) a SQLite file, storing blocks in it.
func openHealthStore(t *testing.T, path string, blocks ...core.Block) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) > 0 {
		if err := st.Commit(t.Context(), store.Change{Insert: blocks}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func newHealthService(t *testing.T, st store.Full, now time.Time) *Service {
	t.Helper()
	svc, err := New(t.Context(), Config{Fleet: healthFleet(), Store: st, Clock: clock.NewSim(now), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// healthOfNodes is each node's health and record, as Nodes shows them.
func healthOfNodes(svc *Service) map[string]core.NodeHealth {
	out := map[string]core.NodeHealth{}
	for _, v := range svc.Nodes() {
		rec := v.Record
		rec.Health = v.Node.Health // what the node is, recorded or not
		out[v.Node.Name] = rec
	}
	return out
}

// freeWholeNodes is how many h100.8x instances the index has free over
// the test blocks' hours.
func freeWholeNodes(t *testing.T, svc *Service) int {
	t.Helper()
	slots, err := svc.Availability(t.Context(), "h100.8x", "", healthT0.Add(2*time.Hour), healthT0.Add(10*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	free := slots[0].Free
	for _, s := range slots {
		free = min(free, s.Free)
	}
	return free
}

func storedNodes(t *testing.T, st store.Store, id string) []string {
	t.Helper()
	b, err := st.GetBlock(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return nodeNames(b.Placements)
}

// TestNodeHealthSurvivesRestart: a node failed by an admin is still
// unhealthy, with its reason, source and time, after the service starts
// again on the same SQLite file, and the block it moved stays moved.
func TestNodeHealthSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "health.db")
	st := openHealthStore(t, path, healthBlock("cb-1", "h100.8x", "n0", 0, 1, 2, 3, 4, 5, 6, 7))
	svc := newHealthService(t, st, healthT0)
	rep, err := svc.FailNode(t.Context(), "n0", "GPU 3: XID 79")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cb-1"}, rep.Replaced); diff != "" {
		t.Fatalf("replaced (-want +got):\n%s", diff)
	}
	moved := storedNodes(t, st, "cb-1")
	if moved[0] == "n0" {
		t.Fatalf("the block stayed on the failed node: %v", moved)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openHealthStore(t, path)
	t.Cleanup(func() { st.Close() })
	svc = newHealthService(t, st, healthT0.Add(time.Hour))
	want := core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "GPU 3: XID 79", Since: healthT0, Source: core.HealthFromAdmin}
	if diff := cmp.Diff(want, healthOfNodes(svc)["n0"]); diff != "" {
		t.Errorf("n0 after the restart (-want +got):\n%s", diff)
	}
	if h := healthOfNodes(svc)["n1"]; h.Health != core.Healthy || !h.Since.IsZero() {
		t.Errorf("n1, never recorded: %+v; want healthy with no record", h)
	}
	if diff := cmp.Diff(moved, storedNodes(t, st, "cb-1")); diff != "" {
		t.Errorf("the moved block after the restart (-want +got):\n%s", diff)
	}
	// Of three nodes, n0 is failed and the block holds another: one is free.
	if free := freeWholeNodes(t, svc); free != 1 {
		t.Errorf("free whole nodes after the restart = %d, want 1 (the failed node is out of placement)", free)
	}
}

// TestFailNodeMovesEachBlockToGPUsOfItsOwn: blocks that share a failed
// node are each moved to free GPUs, none to the GPUs another of them
// was just given (which the store would refuse as a double booking).
func TestFailNodeMovesEachBlockToGPUsOfItsOwn(t *testing.T) {
	st := openHealthStore(t, filepath.Join(t.TempDir(), "health.db"),
		healthBlock("cb-1", "h100.1x", "n0", 0), healthBlock("cb-2", "h100.1x", "n0", 1), healthBlock("cb-3", "h100.1x", "n0", 2))
	t.Cleanup(func() { st.Close() })
	svc := newHealthService(t, st, healthT0)
	rep, err := svc.FailNode(t.Context(), "n0", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cb-1", "cb-2", "cb-3"}, rep.Replaced); diff != "" {
		t.Fatalf("replaced (-want +got):\n%s", diff)
	}
	seen := map[string]string{}
	for _, id := range []string{"cb-1", "cb-2", "cb-3"} {
		b, err := st.GetBlock(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range b.Placements {
			if pl.Node == "n0" {
				t.Errorf("%s is still on the failed node", id)
			}
			for _, g := range pl.GPUs {
				key := fmt.Sprintf("%s/%d", pl.Node, g)
				if other, ok := seen[key]; ok {
					t.Errorf("GPU %s given to both %s and %s", key, other, id)
				}
				seen[key] = id
			}
		}
	}
}

// TestSetNodeHealthSources: how the reports of the engine and the admin
// combine, what each stores, and that a report that changes nothing
// keeps the time the node entered its health.
func TestSetNodeHealthSources(t *testing.T) {
	engine := func(h core.Health, reason string) core.NodeHealth {
		return core.NodeHealth{Node: "n0", Health: h, Reason: reason, Source: core.HealthFromEngine}
	}
	admin := func(h core.Health, reason string) core.NodeHealth {
		return core.NodeHealth{Node: "n0", Health: h, Reason: reason, Source: core.HealthFromAdmin}
	}
	at := func(h int) time.Time { return healthT0.Add(time.Duration(h) * time.Hour) }
	// Each report comes an hour after the one before it, the first at
	// hour 0.
	tests := map[string]struct {
		reports []core.NodeHealth
		want    core.NodeHealth
	}{
		"engine fails": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "XID 79", Since: at(0), Source: core.HealthFromEngine},
		},
		"engine fails then recovers": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79"), engine(core.Healthy, "")},
			want:    core.NodeHealth{Node: "n0", Health: core.Healthy, Since: at(1), Source: core.HealthFromEngine},
		},
		"the engine's healthy does not end an admin's fail": {
			reports: []core.NodeHealth{admin(core.Unhealthy, "drained by ops"), engine(core.Healthy, "")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "drained by ops", Since: at(0), Source: core.HealthFromAdmin},
		},
		"an admin recovers what the engine failed": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79"), admin(core.Healthy, "")},
			want:    core.NodeHealth{Node: "n0", Health: core.Healthy, Since: at(1), Source: core.HealthFromAdmin},
		},
		"the engine's fail keeps an admin's, which its healthy does not end": {
			reports: []core.NodeHealth{admin(core.Unhealthy, "drained by ops"), engine(core.Unhealthy, "XID 79"), engine(core.Healthy, "")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "drained by ops", Since: at(0), Source: core.HealthFromAdmin},
		},
		"the engine fails what an admin recovered": {
			reports: []core.NodeHealth{admin(core.Unhealthy, ""), admin(core.Healthy, ""), engine(core.Unhealthy, "XID 48")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "XID 48", Since: at(2), Source: core.HealthFromEngine},
		},
		"a repeated report keeps the time": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79"), engine(core.Unhealthy, "XID 79")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "XID 79", Since: at(0), Source: core.HealthFromEngine},
		},
		"a new reason keeps the time": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79"), admin(core.Unhealthy, "RMA")},
			want:    core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "RMA", Since: at(0), Source: core.HealthFromAdmin},
		},
		"a healthy node has no reason": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID 79"), engine(core.Healthy, "all clear")},
			want:    core.NodeHealth{Node: "n0", Health: core.Healthy, Since: at(1), Source: core.HealthFromEngine},
		},
		"an engine's reason is made printable and short": {
			reports: []core.NodeHealth{engine(core.Unhealthy, "XID\x1b[31m 79\x00"+strings.Repeat("x", 600))},
			want: core.NodeHealth{Node: "n0", Health: core.Unhealthy, Since: at(0), Source: core.HealthFromEngine,
				Reason: "XID\uFFFD[31m 79\uFFFD" + strings.Repeat("x", 500-len("XID?[31m 79?"))},
		},
		"recovering a node never recorded stores nothing": {
			reports: []core.NodeHealth{admin(core.Healthy, "")},
			want:    core.NodeHealth{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "health.db")
			st := openHealthStore(t, path)
			t.Cleanup(func() { st.Close() })
			sim := clock.NewSim(healthT0)
			svc, err := New(t.Context(), Config{Fleet: healthFleet(), Store: st, Clock: sim, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range tc.reports {
				if i > 0 {
					if _, err := sim.Set(sim.Now().Add(time.Hour)); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := svc.SetNodeHealth(t.Context(), r); err != nil {
					t.Fatalf("report %d: %v", i, err)
				}
			}
			stored, err := st.NodeHealth(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got core.NodeHealth
			if len(stored) > 0 {
				got = stored[0]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stored record (-want +got):\n%s", diff)
			}
			wantHealth := tc.want.Health
			if wantHealth == "" {
				wantHealth = core.Healthy
			}
			if n, _ := svc.index.Node("n0"); n.Health != wantHealth {
				t.Errorf("the index holds n0 %s, want %s", n.Health, wantHealth)
			}
		})
	}
}

func TestSetNodeHealthRefuses(t *testing.T) {
	tests := map[string]struct {
		report core.NodeHealth
		want   error
	}{
		"unknown node": {
			report: core.NodeHealth{Node: "n9", Health: core.Unhealthy, Source: core.HealthFromAdmin},
			want:   core.ErrNotFound,
		},
		"unknown health": {
			report: core.NodeHealth{Node: "n0", Health: "sick", Source: core.HealthFromAdmin},
			want:   core.ErrInvalidArgument,
		},
		"unknown source": {
			report: core.NodeHealth{Node: "n0", Health: core.Unhealthy, Source: "nvml"},
			want:   core.ErrInvalidArgument,
		},
		"an admin's reason with a control character": {
			report: core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "bad\x1b[2J", Source: core.HealthFromAdmin},
			want:   core.ErrInvalidArgument,
		},
		"an admin's reason too long": {
			report: core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: strings.Repeat("é", 501), Source: core.HealthFromAdmin},
			want:   core.ErrInvalidArgument,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := openHealthStore(t, filepath.Join(t.TempDir(), "health.db"))
			t.Cleanup(func() { st.Close() })
			svc := newHealthService(t, st, healthT0)
			if _, err := svc.SetNodeHealth(t.Context(), tc.report); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if stored, err := st.NodeHealth(t.Context()); err != nil || len(stored) != 0 {
				t.Errorf("stored %v %v, want nothing", stored, err)
			}
		})
	}
}

// TestFailNodeCommitFailsLeavesIndex: when the commit of a failure keeps
// conflicting, nothing is stored and the index holds the node healthy
// and its block where it was, as the store does.
func TestFailNodeCommitFailsLeavesIndex(t *testing.T) {
	st := openHealthStore(t, filepath.Join(t.TempDir(), "health.db"), healthBlock("cb-1", "h100.8x", "n0", 0, 1, 2, 3, 4, 5, 6, 7))
	t.Cleanup(func() { st.Close() })
	svc := newHealthService(t, conflicting{st}, healthT0)
	before := freeWholeNodes(t, svc)
	if _, err := svc.FailNode(t.Context(), "n0", "XID 79"); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("failing a node whose commit conflicts: %v; want a conflict", err)
	}
	if stored, err := st.NodeHealth(t.Context()); err != nil || len(stored) != 0 {
		t.Errorf("stored health %v %v, want none", stored, err)
	}
	if h := healthOfNodes(svc)["n0"]; h.Health != core.Healthy {
		t.Errorf("n0 is %s after a failure that was not stored, want healthy", h.Health)
	}
	if n, _ := svc.index.Node("n0"); n.Health != core.Healthy {
		t.Errorf("the index holds n0 %s, want healthy", n.Health)
	}
	b, _ := svc.index.Block("cb-1")
	if diff := cmp.Diff([]string{"n0"}, nodeNames(b.Placements)); diff != "" {
		t.Errorf("the block in the index (-want +got):\n%s", diff)
	}
	if after := freeWholeNodes(t, svc); after != before {
		t.Errorf("free whole nodes %d after the failed commit, %d before", after, before)
	}
}
