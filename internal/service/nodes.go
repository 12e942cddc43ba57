package service

import (
	"context"
	"fmt"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// FailNode marks a node failed (an admin's call on the sim backend; a
// backend's health report elsewhere). Every live block on it that has not
// ended gets replacement GPUs from free capacity of the same pool, keeping
// its id; a block for which none is free is degraded.
func (s *Service) FailNode(ctx context.Context, name string) (contract.NodeReport, error) {
	rep, moved, err := s.failNode(ctx, name)
	// Outside the lock: starting processes takes a while.
	for _, b := range moved {
		s.restartJobsOn(ctx, b, name)
	}
	return rep, err
}

// failNode marks the node failed and replaces it in its blocks; it
// returns the active blocks that moved, whose jobs must restart.
func (s *Service) failNode(ctx context.Context, name string) (contract.NodeReport, []core.Block, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index.Node(name); !ok {
		return contract.NodeReport{}, nil, fmt.Errorf("%w: node %s", core.ErrNotFound, name)
	}
	if err := s.index.SetHealth(name, core.Unhealthy); err != nil {
		return contract.NodeReport{}, nil, err
	}
	now := s.clock.Now()
	rep := contract.NodeReport{Node: name, Health: core.Unhealthy}
	var c store.Change
	for _, b := range s.index.BlocksOn(name, now) {
		pls, err := s.index.PlaceReplacement(b, name)
		if err != nil {
			rep.Degraded = append(rep.Degraded, b.ID)
			c.Events = append(c.Events, s.event(now, core.EventBlockDegraded, b, map[string]any{
				"node": name, "unavailableCapacity": s.unavailable(b), "reason": err.Error()}))
			continue
		}
		moved := b
		moved.Placements = pls
		c.Update = append(c.Update, store.BlockUpdate{Block: moved, ExpectedVersion: b.Version, Replace: true})
		c.Events = append(c.Events, s.event(now, core.EventBlockNodeReplaced, moved, map[string]any{
			"failedNode": name, "nodes": nodeNames(pls)}))
		rep.Replaced = append(rep.Replaced, b.ID)
	}
	if len(c.Events) == 0 {
		return rep, nil, nil
	}
	if err := s.store.Commit(ctx, c); err != nil {
		// The node stays failed; its blocks are degraded until a retry.
		if rerr := s.rebuildIndex(ctx); rerr != nil {
			s.log.Error("rebuilding the index", "err", rerr)
		}
		return rep, nil, fmt.Errorf("replacing node %s in its blocks: %w", name, err)
	}
	s.applyCommitted(c)
	var moved []core.Block
	for _, u := range c.Update {
		if u.Block.State == core.StateActive {
			go s.act("activate", u.Block) // make the replacement GPUs usable
			moved = append(moved, u.Block)
		}
	}
	return rep, moved, nil
}

// restartJobsOn restarts the running jobs of a block whose failed node
// was replaced, on its new GPUs, from their checkpoint directories.
func (s *Service) restartJobsOn(ctx context.Context, b core.Block, node string) {
	if s.jobs == nil {
		return
	}
	jobs, err := s.store.ListJobs(ctx, b.Team, true)
	if err != nil {
		s.log.Error("listing the jobs of a block whose node failed", "block", b.ID, "err", err)
		return
	}
	now := s.clock.Now()
	for _, j := range jobs {
		if j.BlockID != b.ID {
			continue
		}
		next, step, ok := core.JobCapacityMoved(j, node)
		if !ok {
			continue
		}
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("restarting a job after a node failure", "job", j.ID, "err", err)
			continue
		}
		next.Version = j.Version + 1
		s.stopRun(j)
		s.startAfter(ctx, j, next, b) // once the old run's processes are gone
	}
}

// RecoverNode marks a node healthy again. Blocks that were degraded by it
// and hold it still are whole again.
func (s *Service) RecoverNode(ctx context.Context, name string) (contract.NodeReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.index.Node(name)
	if !ok {
		return contract.NodeReport{}, fmt.Errorf("%w: node %s", core.ErrNotFound, name)
	}
	rep := contract.NodeReport{Node: name, Health: core.Healthy}
	if n.Health == core.Healthy {
		return rep, nil
	}
	if err := s.index.SetHealth(name, core.Healthy); err != nil {
		return contract.NodeReport{}, err
	}
	now := s.clock.Now()
	var c store.Change
	for _, b := range s.index.BlocksOn(name, now) {
		if s.unavailable(b) > 0 {
			continue // degraded by another node still
		}
		rep.Recovered = append(rep.Recovered, b.ID)
		c.Events = append(c.Events, s.event(now, core.EventBlockRecovered, b, map[string]any{"node": name}))
	}
	if len(c.Events) > 0 {
		if err := s.store.Commit(ctx, c); err != nil {
			return rep, fmt.Errorf("recording the recovery of node %s: %w", name, err)
		}
		s.notifyEvents()
	}
	return rep, nil
}

// unavailable counts a block's instances on unhealthy nodes. Callers
// hold mu (shared is enough).
func (s *Service) unavailable(b core.Block) int {
	t, _ := s.fleet.Type(b.InstanceType)
	if t.GPUsPerInstance < 1 {
		return 0
	}
	n := 0
	for _, pl := range b.Placements {
		if node, ok := s.index.Node(pl.Node); ok && node.Health == core.Unhealthy {
			n += len(pl.GPUs) / t.GPUsPerInstance
		}
	}
	return n
}
