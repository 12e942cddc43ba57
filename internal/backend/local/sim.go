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
//
// Its writes are fenced as a real engine's are (backend/converge.go):
// each records the block's version and the step of the block's life it
// takes, and a write older than the one recorded is refused (logged,
// counted, and answered as done, as the Slurm backend does: the engine
// already holds a later state, which no retry could undo). Steps order
// the writes of one version: one commit may store a block's activation,
// termination and release together, all at its new version, and a late
// activation must not undo that release. The record of a released block
// is kept, so that a late write finds it.
type Sim struct {
	log   *slog.Logger
	nodes []core.Node

	mu      sync.Mutex
	active  map[string]string   // block id → "active" | "terminating"
	written map[string]simWrite // block id → the last write taken
	stale   int64               // writes refused by the fence
}

// simWrite is a write of a block that the sim took: the block's version
// and the kind of action.
type simWrite struct {
	version int64
	kind    core.ActionKind
}

// before reports whether w is older than v: of an older version, or of
// the same version and an earlier step of the block's life.
func (w simWrite) before(v simWrite) bool {
	if w.version != v.version {
		return w.version < v.version
	}
	return lifeStep(w.kind) < lifeStep(v.kind)
}

// lifeStep orders the actions on a block as its life takes them.
func lifeStep(k core.ActionKind) int {
	switch k {
	case core.ActionActivate:
		return 1
	case core.ActionTerminate:
		return 2
	case core.ActionRelease:
		return 3
	}
	return 0
}

// NewSim returns a simulated backend that has nodes (a copy is kept)
// and logs its actions.
func NewSim(log *slog.Logger, nodes []core.Node) *Sim {
	return &Sim{log: log, nodes: copyNodes(nodes), active: map[string]string{}, written: map[string]simWrite{}}
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
	if s.take(core.ActionActivate, b, "active") {
		s.log.Info("sim backend: block active", "block", b.ID, "nodes", len(b.Placements))
	}
	return nil
}

// Terminate records that the block's workloads were told to stop.
func (s *Sim) Terminate(_ context.Context, b core.Block) error {
	if s.take(core.ActionTerminate, b, "terminating") {
		s.log.Info("sim backend: stopping workloads", "block", b.ID)
	}
	return nil
}

// Release forgets the block, but for the version it was released at.
func (s *Sim) Release(_ context.Context, b core.Block) error {
	if s.take(core.ActionRelease, b, "") {
		s.log.Info("sim backend: block released", "block", b.ID)
	}
	return nil
}

// take records a write of block b that leaves it in state ("" for
// nothing held), unless it is older than the last write taken: then it
// is refused, and take returns false.
func (s *Sim) take(kind core.ActionKind, b core.Block, state string) bool {
	w := simWrite{version: b.Version, kind: kind}
	s.mu.Lock()
	last, ok := s.written[b.ID]
	if ok && w.before(last) {
		s.stale++
		s.mu.Unlock()
		s.log.Warn("sim backend: refused a stale write: a later one of the block was taken", "block", b.ID,
			"action", kind, "version", b.Version, "taken", last.kind, "takenVersion", last.version)
		return false
	}
	s.written[b.ID] = w
	if state == "" {
		delete(s.active, b.ID)
	} else {
		s.active[b.ID] = state
	}
	s.mu.Unlock()
	return true
}

// LastWrite is the last write of block id that the sim took: the kind
// of action and the block's version; ok is false when it took none.
func (s *Sim) LastWrite(id string) (kind core.ActionKind, version int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.written[id]
	return w.kind, w.version, ok
}

// StaleWrites is how many writes the version fence refused since
// NewSim.
func (s *Sim) StaleWrites() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}

// State returns what the backend holds for a block ("" when nothing).
func (s *Sim) State(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[id]
}
