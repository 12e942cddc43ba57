package service

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// FailNode records an admin's word that a node failed, why (reason may
// be empty), and replaces it in its blocks (see SetNodeHealth).
func (s *Service) FailNode(ctx context.Context, name, reason string) (contract.NodeReport, error) {
	return s.SetNodeHealth(ctx, core.NodeHealth{Node: name, Health: core.Unhealthy, Reason: reason, Source: core.HealthFromAdmin})
}

// RecoverNode records an admin's word that a node is healthy again (see
// SetNodeHealth).
func (s *Service) RecoverNode(ctx context.Context, name string) (contract.NodeReport, error) {
	return s.SetNodeHealth(ctx, core.NodeHealth{Node: name, Health: core.Healthy, Source: core.HealthFromAdmin})
}

// SetNodeHealth records a node's health and what it does to the blocks
// on it, in one commit, so that every replica learns both together and a
// restart keeps them (DESIGN.md, invariant 9). A node that fails: every
// live block on it that has not ended gets replacement GPUs from free
// capacity of the same pool, keeping its id, or is degraded when none is
// free. A node that recovers: the blocks it degraded that hold it still
// are whole again.
//
// It is the one path of every health change: an admin's fail and recover
// and, once backends stream them, the engine's reports (NVML, a
// Kubernetes node's conditions, a Slurm node's state). A node that
// disappears from the engine's inventory while it holds blocks is a
// failure too: at start, New reports it here as unhealthy from the
// engine (see inventory.go; the inventory is read only at start so far).
//
// The sources combine so: an engine's report that a node is healthy does
// not end an admin's fail (ops may have drained it for what the engine
// cannot see) and is ignored; only an admin's recover ends it. An
// engine's report that a node failed always counts. A report that
// changes nothing stores nothing, so that an engine may repeat itself.
//
// h.Since is not read: the service clock stamps when the node entered
// its health, and a record that keeps the health keeps that time. A
// conflict with another replica's commit is retried on a caught-up
// index, a bounded number of times.
func (s *Service) SetNodeHealth(ctx context.Context, h core.NodeHealth) (contract.NodeReport, error) {
	h, err := checkNodeHealth(h)
	if err != nil {
		return contract.NodeReport{}, err
	}
	for attempt := 1; ; attempt++ {
		rep, moved, err := s.setNodeHealth(ctx, h)
		if err == nil {
			// Outside the lock: starting processes takes a while.
			for _, b := range moved {
				s.restartJobsOn(ctx, b, h.Node)
			}
			if h.Health == core.Healthy {
				s.kickOrders() // a node recovered: standing orders may fit
			}
			return rep, nil
		}
		if !store.IsConflict(err) {
			return contract.NodeReport{}, err
		}
		if attempt == maxCommitAttempts {
			// The store's detail may name another team's block: it goes
			// to the log only.
			s.log.Warn("a node's health change kept conflicting with stored state", "node", h.Node, "attempts", attempt, "err", err)
			return contract.NodeReport{}, fmt.Errorf("%w: the blocks on node %s changed concurrently %d times in a row; try again", core.ErrConflict, h.Node, attempt)
		}
		s.log.Warn("a node's health change conflicted with stored state; retrying once the index has caught up", "node", h.Node, "attempt", attempt, "err", err)
		if err := s.catchUp(ctx); err != nil {
			return contract.NodeReport{}, fmt.Errorf("catching up after a conflict on node %s: %w", h.Node, err)
		}
	}
}

// setNodeHealth decides and commits one attempt of SetNodeHealth under
// the lock. It returns the active blocks that moved, whose jobs must
// restart. On failure the index is left as it was, or, when the commit
// may have been stored all the same, as the store holds it.
func (s *Service) setNodeHealth(ctx context.Context, h core.NodeHealth) (contract.NodeReport, []core.Block, error) {
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	if _, ok := s.index.Node(h.Node); !ok {
		return contract.NodeReport{}, nil, fmt.Errorf("%w: node %s", core.ErrNotFound, h.Node)
	}
	// A block on the node whose change is in flight is waited for: it
	// must be decided on as committed.
	s.awaitSettled(func() bool { return !s.changingOn(h.Node) }, func() {})
	// 1. What is recorded, and what the report makes of it.
	cur := s.healthRecord(h.Node)
	if overruled(cur, h) {
		return contract.NodeReport{Node: h.Node, Health: cur.Health, Record: cur}, nil, nil
	}
	now := s.clock.Now()
	next := h
	next.Since = now
	if cur.Health == next.Health && !cur.Since.IsZero() {
		next.Since = cur.Since
	}
	changed := cur.Health != next.Health || cur.Reason != next.Reason || (!cur.Since.IsZero() && cur.Source != next.Source)
	rep := contract.NodeReport{Node: h.Node, Health: next.Health, Record: next}
	if !changed {
		rep.Record = cur
	}
	// 2. The blocks on the node, decided on the index.
	var (
		c     store.Change
		moved []core.Block
	)
	key := newID("nh") // the decision the replacements are assumed under
	if err := s.index.SetHealth(h.Node, next.Health); err != nil {
		return contract.NodeReport{}, nil, err
	}
	switch {
	case next.Health == core.Unhealthy:
		s.replaceOn(&c, &rep, key, h.Node, now, cur.Health == core.Healthy)
	case cur.Health == core.Unhealthy:
		s.recoverOn(&c, &rep, h.Node, now)
	}
	if !changed && len(c.Update) == 0 {
		return rep, nil, nil // the index holds what it held
	}
	if changed {
		c.NodeHealth = []core.NodeHealth{next}
	}
	for _, u := range c.Update { // the engine makes the replacement GPUs usable
		if u.Block.State == core.StateActive {
			c.Actions = append(c.Actions, s.activeActions(u.Block, u.ExpectedVersion+1)...)
		}
	}
	s.addReserves(&c) // and holds those of blocks to come
	// 3. One commit of the health and the blocks, without the lock; the
	// index then confirms the moves, or forgets them and takes the node's
	// health back.
	s.mu.Unlock()
	locked = false
	err := s.store.Commit(ctx, c)
	s.mu.Lock()
	locked = true
	defer s.settled.Broadcast()
	if err != nil {
		s.index.Forget(key)
		if herr := s.index.SetHealth(h.Node, cur.Health); herr != nil {
			s.log.Error("putting back a node's health that was not stored", "node", h.Node, "err", herr)
		}
		if !store.IsConflict(err) {
			// Stored all the same, perhaps (its answer lost once it was
			// durable): the index and the node's health follow what the
			// store holds, as a purchase's do (settle).
			s.mu.Unlock()
			locked = false
			s.indexStored(c)
			s.reloadHealth(ctx)
		}
		return contract.NodeReport{}, nil, fmt.Errorf("recording the health of node %s: %w", h.Node, err)
	}
	s.index.Confirm(key)
	if changed {
		s.health[h.Node] = next
		s.healthGen++
		// An index rebuilt from the store while this commit ran (reindex)
		// holds the node's health as it was recorded before.
		if err := s.index.SetHealth(h.Node, next.Health); err != nil {
			s.log.Error("applying a node's recorded health", "node", h.Node, "err", err)
		}
	}
	s.applyCommitted(c)
	if len(c.Actions) > 0 {
		s.kickOutbox()
	}
	for _, u := range c.Update {
		if u.Block.State == core.StateActive {
			moved = append(moved, u.Block)
		}
	}
	return rep, moved, nil
}

// replaceOn adds to c the blocks on a failed node moved to replacement
// GPUs, and, when the node has just failed, the events of those left
// degraded. Each moved block is assumed on the index under key at once,
// so that the next one is not placed on the same GPUs. Callers hold mu.
func (s *Service) replaceOn(c *store.Change, rep *contract.NodeReport, key, node string, now time.Time, newly bool) {
	for _, b := range s.index.BlocksOn(node, now) {
		pls, err := s.index.PlaceReplacement(b, node)
		if err != nil {
			rep.Degraded = append(rep.Degraded, b.ID)
			if newly {
				c.Events = append(c.Events, s.event(now, core.EventBlockDegraded, b, map[string]any{
					"node": node, "unavailableCapacity": s.unavailable(b), "reason": err.Error()}))
			}
			continue
		}
		moved := b
		moved.Placements = pls
		if err := s.index.AssumeAs(key, moved); err != nil {
			s.log.Error("assuming a block moved off a failed node", "block", b.ID, "err", err)
			continue
		}
		c.Update = append(c.Update, store.BlockUpdate{Block: moved, ExpectedVersion: b.Version, Replace: true, From: now})
		c.Events = append(c.Events, s.event(now, core.EventBlockNodeReplaced, moved, map[string]any{
			"failedNode": node, "nodes": nodeNames(pls)}))
		rep.Replaced = append(rep.Replaced, b.ID)
	}
}

// changingOn reports whether a block on node is in a decision not yet
// committed. Callers hold mu.
func (s *Service) changingOn(node string) bool {
	if s.index.InFlight() == 0 {
		return false
	}
	for _, b := range s.index.Blocks() {
		if !s.index.Assumed(b.ID) {
			continue
		}
		for _, pl := range b.Placements {
			if pl.Node == node {
				return true
			}
		}
	}
	return false
}

// recoverOn adds to c the events of the blocks on a recovered node that
// are whole again. Callers hold mu.
func (s *Service) recoverOn(c *store.Change, rep *contract.NodeReport, node string, now time.Time) {
	for _, b := range s.index.BlocksOn(node, now) {
		if s.unavailable(b) > 0 {
			continue // degraded by another node still
		}
		rep.Recovered = append(rep.Recovered, b.ID)
		c.Events = append(c.Events, s.event(now, core.EventBlockRecovered, b, map[string]any{"node": node}))
	}
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
		// The old run's instances stop, and the new run's start once
		// they are gone (actions of the commit).
		if err := s.commitJob(ctx, j, next, step, now); err != nil {
			s.log.Warn("restarting a job after a node failure", "job", j.ID, "err", err)
		}
	}
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
