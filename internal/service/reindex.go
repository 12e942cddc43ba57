package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// reindexTries is how many times reindex builds a new index apart, to be
// swapped in only if the index did not change meanwhile, before it holds
// the other decisions back while it builds one more.
const reindexTries = 3

// reindexing says what a reindex reloads, and when it is still needed.
type reindexing struct {
	// why names the rebuild in the log.
	why string
	// health reloads the node health too, into the new index and into
	// s.health.
	health bool
	// due, when set, reports whether the index (s.index; mu held, shared
	// at least) still needs the rebuild: a rebuild by another path
	// meanwhile may have done it.
	due func() bool
}

// reindex replaces the index with one built from the store's live blocks
// (and node health, with r.health), without store I/O under the
// exclusive lock. It reads the store and builds and warms the new index
// apart, and swaps it in, under the lock, only if the index did not
// change meanwhile (Changes; no decision was in flight when the store
// was read, so every decision the index holds is committed, and each one
// since changed it). After reindexTries it holds the lock apart
// (letReadersIn): searches go on while it reads and builds once more,
// but decisions and the notices of other replicas wait, as the index
// must take them in after the swap. Callers do not hold mu.
func (s *Service) reindex(ctx context.Context, r reindexing) error {
	for range reindexTries {
		s.mu.RLock()
		old, changes, gen := s.index, s.index.Changes(), s.healthGen
		due := r.due == nil || r.due()
		quiet := old.InFlight() == 0
		fleet := s.fleet
		fleet.Nodes = s.currentNodes()
		s.mu.RUnlock()
		if !due {
			return nil
		}
		if !quiet {
			time.Sleep(10 * time.Millisecond) // its commit takes milliseconds
			continue
		}
		ix, health, err := s.readIndex(ctx, fleet, r.health)
		if ix == nil {
			return err
		}
		s.mu.Lock()
		swapped := s.index == old && old.Changes() == changes && s.healthGen == gen
		if swapped {
			s.swapIndex(ix, health)
		}
		s.mu.Unlock()
		if swapped {
			return err
		}
	}
	// Hold the other decisions back, once the ones in flight have
	// settled (or settleWait has passed: the commit of one still in
	// flight then takes its blocks into the new index, see settle).
	s.log.Info("the index changed throughout its rebuild; rebuilding it with decisions held back", "rebuild", r.why)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaitSettled(func() bool { return s.index.InFlight() == 0 }, func() {})
	if r.due != nil && !r.due() {
		return nil
	}
	fleet := s.fleet
	fleet.Nodes = s.currentNodes()
	s.mu.letReadersIn()
	ix, health, err := s.readIndex(ctx, fleet, r.health)
	s.mu.shutReadersOut()
	if ix != nil {
		s.swapIndex(ix, health)
	}
	return err
}

// readIndex reads the live blocks, and with withHealth the node health,
// from the store and builds and warms an index of them on fleet. Without
// the health, or when it could not be read (err says so, ix is still
// built), the nodes keep their health in fleet. ix is nil when the
// blocks could not be read or indexed. It reads nothing that mu guards.
func (s *Service) readIndex(ctx context.Context, fleet core.Fleet, withHealth bool) (ix *core.Index, health map[string]core.NodeHealth, err error) {
	var herr error
	if withHealth {
		if health, herr = s.readHealth(ctx); herr == nil {
			fleet.Nodes = nodesWithHealth(fleet.Nodes, health)
		}
	}
	blocks, err := s.store.ListBlocks(ctx, store.BlockFilter{States: liveStates})
	if err != nil {
		return nil, nil, errors.Join(herr, fmt.Errorf("loading live blocks: %w", err))
	}
	if ix, err = s.newIndex(fleet, blocks); err != nil {
		return nil, nil, errors.Join(herr, err)
	}
	ix.Warm() // the first placement would build it under the lock
	return ix, health, herr
}

// swapIndex puts ix in place of the index, and health, when set, in
// place of what this replica knows of node health: a reload of the health
// that read before this one is older (healthGen). Callers hold mu.
func (s *Service) swapIndex(ix *core.Index, health map[string]core.NodeHealth) {
	s.index = ix
	if health != nil {
		s.health = health
		s.healthGen++
	}
}

// nodesWithHealth returns nodes, each with its health in health (healthy
// when it has no record).
func nodesWithHealth(nodes []core.Node, health map[string]core.NodeHealth) []core.Node {
	out := make([]core.Node, len(nodes))
	for i, n := range nodes {
		n.Health = core.Healthy
		if rec, ok := health[n.Name]; ok {
			n.Health = rec.Health
		}
		out[i] = n
	}
	return out
}
