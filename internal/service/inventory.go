package service

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/core"
)

// Bounds of an inventory node, the fleet file's own (package fleet).
const (
	maxInventoryGPUs = 64
	maxInventoryName = 63
)

// missingReason is the reason recorded for a node that live blocks hold
// but that the backend's inventory no longer reports.
const missingReason = "the backend's inventory no longer reports this node"

// inventoryNodes asks the backend for its nodes: they, not the fleet
// file's, are the fleet's nodes; the fleet file gives the instance types,
// prices and limits. A service without a backend (it applies no engine
// actions) has the nodes the sim backend would report: the fleet file's.
// Nodes that fail checkInventory are logged and left out.
func inventoryNodes(ctx context.Context, be backend.Backend, f core.Fleet, log *slog.Logger) ([]core.Node, error) {
	if be == nil {
		be = local.NewSim(log, f.Nodes)
	}
	nodes, err := be.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the %s backend for its inventory: %w", be.Name(), err)
	}
	kept, left := checkInventory(nodes, f.Types)
	for _, why := range left {
		log.Error("a node of the backend's inventory is left out of the fleet", "backend", be.Name(), "problem", why)
	}
	if len(kept) == 0 {
		log.Warn("the backend's inventory holds no node that can be sold", "backend", be.Name(), "reported", len(nodes))
	}
	return kept, nil
}

// checkInventory keeps the nodes that the fleet file's checks would
// accept, each healthy (health is recorded apart): a name, a zone and a
// rack (the rack may be unknown) of letters, digits, '-', '_' and '.',
// at most 63 characters; a GPU model that some instance type sells;
// 1 to 64 GPUs, a whole number of instances of every type of the model;
// no label with an empty key; a name reported once (the first report
// is kept). It returns why each other node was left out.
func checkInventory(nodes []core.Node, types []core.InstanceType) (kept []core.Node, left []string) {
	sizes := map[string][]core.InstanceType{} // GPU model → the types selling it
	for _, t := range types {
		sizes[t.GPUModel] = append(sizes[t.GPUModel], t)
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		if why := nodeProblem(n, sizes); why != "" {
			left = append(left, fmt.Sprintf("node #%d %q: %s", i+1, n.Name, why))
			continue
		}
		if seen[n.Name] {
			left = append(left, fmt.Sprintf("node #%d %q: the name is reported twice; the first report is kept", i+1, n.Name))
			continue
		}
		seen[n.Name] = true
		n.Health = core.Healthy
		kept = append(kept, n)
	}
	return kept, left
}

// nodeProblem says what is wrong with one inventory node, or "".
func nodeProblem(n core.Node, sizes map[string][]core.InstanceType) string {
	for _, f := range []struct{ key, value string }{{"name", n.Name}, {"zone", n.Zone}, {"gpuModel", n.GPUModel}} {
		if f.value == "" {
			return f.key + " is missing"
		}
	}
	for _, f := range []struct{ key, value string }{{"name", n.Name}, {"zone", n.Zone}, {"rack", n.Rack}, {"gpuModel", n.GPUModel}} {
		if why := nameProblem(f.value); why != "" {
			return f.key + " " + why
		}
	}
	if n.GPUs < 1 || n.GPUs > maxInventoryGPUs {
		return fmt.Sprintf("gpus is %d, must be 1 to %d", n.GPUs, maxInventoryGPUs)
	}
	if _, ok := n.Labels[""]; ok {
		return "a label has an empty key"
	}
	ts, sold := sizes[n.GPUModel]
	if !sold {
		return fmt.Sprintf("no instance type sells gpuModel %q", n.GPUModel)
	}
	for _, t := range ts {
		if t.GPUsPerInstance < 1 || n.GPUs%t.GPUsPerInstance != 0 {
			return fmt.Sprintf("its %d GPUs are not a whole number of %s instances (%d GPUs each)", n.GPUs, t.Name, t.GPUsPerInstance)
		}
	}
	return ""
}

// nameProblem is the fleet file's rule for names: safe in URLs, labels
// and file names.
func nameProblem(s string) string {
	if len(s) > maxInventoryName {
		return fmt.Sprintf("%q is longer than %d characters", s, maxInventoryName)
	}
	ok := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
	if !ok {
		return fmt.Sprintf("%q may hold only letters, digits, '-', '_' and '.'", s)
	}
	return ""
}

// missingNodes returns, sorted by name, a stand-in for each node that a
// live block is placed on but that nodes (the inventory) does not hold:
// a fleet file changed between restarts, a node removed from the
// cluster. The stand-in keeps the block in the index, so that the server
// starts and the node's blocks can be moved off it: its GPU model and
// zone are the block's, its GPUs those of the inventory's nodes of that
// model and zone that are enough for the GPUs the blocks use on it (so
// that it is in their pool, where replacements are found), else just
// those GPUs. Its rack is unknown.
func missingNodes(nodes []core.Node, blocks []core.Block) []core.Node {
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	missing := map[string]*core.Node{}
	for _, b := range blocks {
		for _, pl := range b.Placements {
			if have[pl.Node] {
				continue
			}
			m := missing[pl.Node]
			if m == nil {
				m = &core.Node{Name: pl.Node, Zone: b.Zone, GPUModel: b.GPUModel, Health: core.Healthy}
				missing[pl.Node] = m
			}
			for _, g := range pl.GPUs {
				m.GPUs = max(m.GPUs, g+1)
			}
		}
	}
	out := make([]core.Node, 0, len(missing))
	for _, m := range missing {
		size := 0
		for _, n := range nodes {
			if n.GPUModel == m.GPUModel && n.Zone == m.Zone && n.GPUs >= m.GPUs && (size == 0 || n.GPUs < size) {
				size = n.GPUs
			}
		}
		if size > 0 {
			m.GPUs = size
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// reportMissing records each missing node as failed, from the engine,
// through the health path (SetNodeHealth): its blocks get replacement
// GPUs or are degraded, and every replica learns it. A node back in the
// inventory whose record is that failure is reported healthy again.
func (s *Service) reportMissing(ctx context.Context, missing []core.Node) error {
	for _, n := range missing {
		s.log.Error("live blocks are placed on a node that the backend's inventory no longer reports; it is recorded as failed and its blocks are moved off it where capacity allows",
			"node", n.Name, "gpuModel", n.GPUModel, "zone", n.Zone)
		rep, err := s.SetNodeHealth(ctx, core.NodeHealth{Node: n.Name, Health: core.Unhealthy, Reason: missingReason, Source: core.HealthFromEngine})
		if err != nil {
			return fmt.Errorf("recording node %s, missing from the inventory, as failed: %w", n.Name, err)
		}
		if len(rep.Degraded) > 0 {
			s.log.Error("blocks on a node missing from the inventory found no replacement and are degraded", "node", n.Name, "blocks", rep.Degraded)
		}
	}
	isMissing := make(map[string]bool, len(missing))
	for _, n := range missing {
		isMissing[n.Name] = true
	}
	var back []string
	s.mu.RLock()
	for _, n := range s.fleet.Nodes {
		rec, ok := s.health[n.Name]
		if !isMissing[n.Name] && ok && rec.Health == core.Unhealthy && rec.Source == core.HealthFromEngine && rec.Reason == missingReason {
			back = append(back, n.Name)
		}
	}
	s.mu.RUnlock()
	for _, name := range back {
		s.log.Info("a node is back in the backend's inventory", "node", name)
		if _, err := s.SetNodeHealth(ctx, core.NodeHealth{Node: name, Health: core.Healthy, Source: core.HealthFromEngine}); err != nil {
			return fmt.Errorf("recording node %s, back in the inventory, as healthy: %w", name, err)
		}
	}
	return nil
}
