package backend

import (
	"context"
	"log/slog"
	"sync"

	"capblock/internal/core"
)

// Sim is the simulated backend: it records what a real backend would do.
type Sim struct {
	log *slog.Logger

	mu     sync.Mutex
	active map[string]string // block id → "active" | "terminating"
}

// NewSim returns a simulated backend that logs its actions.
func NewSim(log *slog.Logger) *Sim { return &Sim{log: log, active: map[string]string{}} }

// Name returns "sim".
func (s *Sim) Name() string { return "sim" }

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
