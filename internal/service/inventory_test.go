package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

var invT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// reporting is a backend whose inventory is nodes (or err); it takes
// every action.
type reporting struct {
	nodes []core.Node
	err   error
}

func (reporting) Name() string { return "reporting" }
func (r reporting) Inventory(context.Context) ([]core.Node, error) {
	return append([]core.Node(nil), r.nodes...), r.err
}
func (reporting) Activate(context.Context, core.Block) error  { return nil }
func (reporting) Terminate(context.Context, core.Block) error { return nil }
func (reporting) Release(context.Context, core.Block) error   { return nil }

func TestReportingBackend(t *testing.T) {
	backendtest.Exercise(t, func(*testing.T) backend.Backend { return reporting{nodes: invFleet().Nodes} })
}

// invFleet is the fleet file of these tests: H100 nodes f0 and f1 in
// zone z, sold whole (h100.8x) or by four GPUs (h100.4x).
func invFleet() core.Fleet {
	return core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{
			{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}},
			{Name: "h100.4x", GPUModel: "H100", GPUsPerInstance: 4, OnDemand: core.Money{Minor: 4916, Currency: "USD"}},
		},
		Nodes: []core.Node{invNode("f0", "z"), invNode("f1", "z")}}
}

func invNode(name, zone string) core.Node {
	return core.Node{Name: name, Zone: zone, Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy}
}

func newInvService(t *testing.T, st store.Full, be backend.Backend) (*Service, error) {
	t.Helper()
	return New(t.Context(), Config{Fleet: invFleet(), Store: st, Backend: be, Clock: clock.NewSim(invT0), Log: slog.New(slog.DiscardHandler)})
}

func openInvStore(t *testing.T, path string, blocks ...core.Block) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if len(blocks) > 0 {
		if err := st.Commit(t.Context(), store.Change{Insert: blocks}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestNodesComeFromTheInventory: the service's nodes are the backend's,
// not the fleet file's: Fleet, Nodes and search show exactly those.
func TestNodesComeFromTheInventory(t *testing.T) {
	i0, i1 := invNode("i0", "zi"), invNode("i1", "zi")
	i0.Labels = map[string]string{"fabric": "ib"}
	i1.Health = core.Unhealthy // health is not the inventory's to say
	st := openInvStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	svc, err := newInvService(t, st, reporting{nodes: []core.Node{i0, i1}})
	if err != nil {
		t.Fatal(err)
	}
	i1.Health = core.Healthy
	if diff := cmp.Diff([]core.Node{i0, i1}, svc.Fleet().Nodes); diff != "" {
		t.Errorf("Fleet().Nodes (-inventory +service):\n%s", diff)
	}
	var names []string
	for _, v := range svc.Nodes() {
		names = append(names, v.Node.Name)
	}
	if diff := cmp.Diff([]string{"i0", "i1"}, names); diff != "" {
		t.Errorf("Nodes() (-want +got):\n%s", diff)
	}
	search := func(count int, zone string) ([]core.Offering, error) {
		return svc.Offerings(t.Context(), core.SearchRequest{Types: []string{"h100.8x"}, Count: count, Duration: time.Hour,
			StartAfter: invT0.Add(time.Hour), EndBefore: invT0.Add(2 * time.Hour), Zone: zone})
	}
	offs, err := search(2, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) == 0 {
		t.Fatal("no offering of the inventory's two nodes")
	}
	for _, o := range offs {
		if o.Zone != "zi" {
			t.Errorf("an offering in zone %q, want the inventory's zone zi", o.Zone)
		}
	}
	if offs, err := search(3, ""); err != nil || len(offs) != 0 {
		t.Errorf("three nodes: %d offerings, %v; want none, the inventory has two", len(offs), err)
	}
	if _, err := search(1, "z"); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("a search in the fleet file's zone z: %v, want invalid (unknown zone)", err)
	}
}

// TestInventoryError: a backend that cannot say what it has stops the
// start, saying so.
func TestInventoryError(t *testing.T) {
	st := openInvStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	_, err := newInvService(t, st, reporting{err: backendtest.ErrInjected})
	if !errors.Is(err, backendtest.ErrInjected) || !strings.Contains(err.Error(), "asking the reporting backend for its inventory") {
		t.Errorf("New: %v, want the inventory's error, said so", err)
	}
}

// TestCheckInventory: the fleet file's rules hold for the inventory's
// nodes; a node that breaks one is left out, and why is said.
func TestCheckInventory(t *testing.T) {
	types := invFleet().Types
	with := func(f func(*core.Node)) core.Node {
		n := invNode("n", "z")
		f(&n)
		return n
	}
	tests := map[string]struct {
		node core.Node
		want string // "" when kept; else in the reason
	}{
		"a good node":            {node: invNode("n", "z")},
		"no rack is fine":        {node: with(func(n *core.Node) { n.Rack = "" })},
		"labels are fine":        {node: with(func(n *core.Node) { n.Labels = map[string]string{"k": "v"} })},
		"no name":                {node: with(func(n *core.Node) { n.Name = "" }), want: "name is missing"},
		"no zone":                {node: with(func(n *core.Node) { n.Zone = "" }), want: "zone is missing"},
		"no GPU model":           {node: with(func(n *core.Node) { n.GPUModel = "" }), want: "gpuModel is missing"},
		"a name with a slash":    {node: with(func(n *core.Node) { n.Name = "a/b" }), want: "name \"a/b\" may hold only"},
		"a rack with a space":    {node: with(func(n *core.Node) { n.Rack = "r 1" }), want: "rack \"r 1\" may hold only"},
		"a name too long":        {node: with(func(n *core.Node) { n.Name = strings.Repeat("n", 64) }), want: "longer than 63"},
		"no GPUs":                {node: with(func(n *core.Node) { n.GPUs = 0 }), want: "gpus is 0, must be 1 to 64"},
		"too many GPUs":          {node: with(func(n *core.Node) { n.GPUs = 72 }), want: "gpus is 72"},
		"a model nobody sells":   {node: with(func(n *core.Node) { n.GPUModel = "B200" }), want: `no instance type sells gpuModel "B200"`},
		"GPUs a type cannot use": {node: with(func(n *core.Node) { n.GPUs = 6 }), want: "not a whole number of h100.8x instances"},
		"an empty label key":     {node: with(func(n *core.Node) { n.Labels = map[string]string{"": "v"} }), want: "a label has an empty key"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kept, left := checkInventory([]core.Node{tc.node}, types)
			switch {
			case tc.want == "" && (len(kept) != 1 || len(left) != 0):
				t.Errorf("kept %v, left out because %v; want it kept", kept, left)
			case tc.want != "" && (len(kept) != 0 || len(left) != 1 || !strings.Contains(left[0], tc.want)):
				t.Errorf("kept %v, left out because %v; want it left out because %q", kept, left, tc.want)
			}
		})
	}
}

// TestInventoryLeavesOut: through New, a node of a model nobody sells
// and a second report of a name are left out; the others are the fleet.
func TestInventoryLeavesOut(t *testing.T) {
	b200 := invNode("b0", "z")
	b200.GPUModel = "B200"
	twice := invNode("i0", "z2")
	st := openInvStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	svc, err := newInvService(t, st, reporting{nodes: []core.Node{invNode("i0", "z"), b200, twice, invNode("i1", "z")}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.Node{invNode("i0", "z"), invNode("i1", "z")}, svc.Fleet().Nodes); diff != "" {
		t.Errorf("Fleet().Nodes (-want +got):\n%s", diff)
	}
}

// TestNilBackendHasTheFleetFileNodes: a service that runs no engine has
// the nodes the sim would report, the fleet file's.
func TestNilBackendHasTheFleetFileNodes(t *testing.T) {
	st := openInvStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	svc, err := newInvService(t, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(invFleet().Nodes, svc.Fleet().Nodes); diff != "" {
		t.Errorf("Fleet().Nodes (-fleet file +service):\n%s", diff)
	}
}

// TestMissingNodeFails: a node that a live block holds but that the
// inventory no longer reports does not vanish: the server starts, the
// node is recorded as failed by the engine, and its block moves to a
// free node of its pool. Back in the inventory, it is healthy again.
func TestMissingNodeFails(t *testing.T) {
	blk := core.Block{ID: "cb-1", Team: "t", InstanceType: "h100.4x", GPUModel: "H100", Count: 1, Zone: "z",
		Start: invT0.Add(2 * time.Hour), End: invT0.Add(10 * time.Hour), State: core.StateScheduled, CreatedAt: invT0,
		Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: "gone", GPUs: []int{0, 1, 2, 3}}}}
	path := filepath.Join(t.TempDir(), "capblock.db")
	st := openInvStore(t, path, blk)
	svc, err := newInvService(t, st, reporting{nodes: []core.Node{invNode("f0", "z")}})
	if err != nil {
		t.Fatal(err)
	}
	// 1. The stand-in is in the fleet, failed, in the block's pool.
	want := []core.Node{invNode("f0", "z"), {Name: "gone", Zone: "z", GPUModel: "H100", GPUs: 8, Health: core.Unhealthy}}
	if diff := cmp.Diff(want, svc.Fleet().Nodes); diff != "" {
		t.Errorf("Fleet().Nodes (-want +got):\n%s", diff)
	}
	recs, err := st.NodeHealth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantRec := []core.NodeHealth{{Node: "gone", Health: core.Unhealthy, Reason: missingReason, Since: invT0, Source: core.HealthFromEngine}}
	if diff := cmp.Diff(wantRec, recs); diff != "" {
		t.Errorf("stored health (-want +got):\n%s", diff)
	}
	// 2. The block moved to the inventory's node.
	got, err := st.GetBlock(t.Context(), "cb-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Placements) != 1 || got.Placements[0].Node != "f0" {
		t.Errorf("block placed on %v, want moved to f0", got.Placements)
	}
	// 3. A restart with the node back in the inventory: healthy again.
	svc, err = newInvService(t, st, reporting{nodes: []core.Node{invNode("f0", "z"), invNode("gone", "z")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range svc.Nodes() {
		if v.Node.Health != core.Healthy {
			t.Errorf("node %s is %s after the restart, want healthy", v.Node.Name, v.Node.Health)
		}
	}
}

// TestMissingNodeDegrades: with no free capacity in its pool, the block
// of a missing node stays on it, degraded, and the server still starts.
func TestMissingNodeDegrades(t *testing.T) {
	blk := core.Block{ID: "cb-1", Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "z",
		Start: invT0.Add(2 * time.Hour), End: invT0.Add(10 * time.Hour), State: core.StateScheduled, CreatedAt: invT0,
		Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: "gone", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	st := openInvStore(t, filepath.Join(t.TempDir(), "capblock.db"), blk)
	if _, err := newInvService(t, st, reporting{}); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetBlock(t.Context(), "cb-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blk.Placements, got.Placements); diff != "" {
		t.Errorf("placements (-before +after):\n%s", diff)
	}
	recs, err := st.NodeHealth(t.Context())
	if err != nil || len(recs) != 1 || recs[0].Node != "gone" || recs[0].Health != core.Unhealthy {
		t.Errorf("stored health %v, %v; want gone unhealthy", recs, err)
	}
}
