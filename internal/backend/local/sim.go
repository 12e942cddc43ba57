package local

import (
	"context"
	"log/slog"
	"maps"
	"sync"

	"capblock/internal/backend"
	"capblock/internal/core"
)

var _ backend.Backend = (*Sim)(nil)

// Sim is the simulated backend: it reports the nodes it was built from
// (the fleet file's, or the demo fleet's) as its inventory, and records
// what a real backend would do.
type Sim struct {
	log   *slog.Logger
	nodes []core.Node

	mu     sync.Mutex
	active map[string]string // block id → "active" | "terminating"
}

// NewSim returns a simulated backend that has nodes (a copy is kept)
// and logs its actions.
func NewSim(log *slog.Logger, nodes []core.Node) *Sim {
	return &Sim{log: log, nodes: copyNodes(nodes), active: map[string]string{}}
}

// Name returns "sim".
func (s *Sim) Name() string { return "sim" }

// Inventory reports the nodes the sim was built from, each healthy: the
// sim's health changes only by an admin's fail or recover, which the
// service records.
func (s *Sim) Inventory(context.Context) ([]core.Node, error) {
	nodes := copyNodes(s.nodes)
	for i := range nodes {
		nodes[i].Health = core.Healthy
	}
	return nodes, nil
}

// copyNodes copies nodes and their labels, so that neither side of a
// call sees the other's changes.
func copyNodes(nodes []core.Node) []core.Node {
	out := make([]core.Node, len(nodes))
	for i, n := range nodes {
		if n.Labels != nil {
			n.Labels = maps.Clone(n.Labels)
		}
		out[i] = n
	}
	return out
}

// Activate records the block as active.
func (s *Sim) Activate(_ context.Context, b core.Block) error {
	s.set(b.ID, "active")
	s.log.Info("sim backend: block active", "block", b.ID, "nodes", len(b.Placements))
	return nil
}

// Terminate records that the block's workloads were told to stop.
func (s *Sim) Terminate(_ context.Context, b core.Block) error {
	s.set(b.ID, "terminating")
	s.log.Info("sim backend: stopping workloads", "block", b.ID)
	return nil
}

// Release forgets the block.
func (s *Sim) Release(_ context.Context, b core.Block) error {
	s.mu.Lock()
	delete(s.active, b.ID)
	s.mu.Unlock()
	s.log.Info("sim backend: block released", "block", b.ID)
	return nil
}

// State returns what the backend holds for a block ("" when nothing).
func (s *Sim) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[id]
}

func (s *Sim) set(id, state string) {
	s.mu.Lock()
	s.active[id] = state
	s.mu.Unlock()
}
