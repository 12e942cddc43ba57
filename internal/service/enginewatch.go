package service

import (
	"context"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// The engine watch keeps the nodes' health in step with the engine while
// this replica leads: every EnginePoll it reads the backend's inventory
// and, from a backend that knows it (backend.HealthReporter), its nodes'
// health, and reports what changed through SetNodeHealth, the path an
// admin's fail and recover take. So a node the engine says failed, or
// that left the engine, is recorded unhealthy from the engine, with the
// engine's reason; the blocks on it get replacement GPUs, and every
// replica and every restart sees it. A node the engine says healthy again
// is recovered, unless an admin failed it: only an admin recovers that.
//
// Only differences are reported: the watch compares the engine's word
// with the records this replica holds, so that a quiet fleet costs one
// inventory read a poll and no commit. A backend that cannot be read is
// logged and asked again at the next poll; its nodes keep their health
// (an outage of the engine's API is not a failure of every node).
//
// The fleet's nodes are those of the inventory at start: a node that the
// engine gains later is logged, and sold from the next start on.

// defaultEnginePoll is how often the leader reads the engine's nodes.
const defaultEnginePoll = 10 * time.Second

// startEngineWatch runs the engine watch until the returned stop is
// called, which waits for it to end. Without a backend there is no
// engine to watch.
func (s *Service) startEngineWatch(ctx context.Context) (stop func()) {
	if s.backend == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := engineWatch{svc: s, announced: map[string]bool{}}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.enginePoll):
			}
			w.check(ctx)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// engineWatch is the state of one leader's watch: the new nodes it has
// already logged.
type engineWatch struct {
	svc       *Service
	announced map[string]bool
}

// check reads the engine once and reports each node whose health the
// engine changed.
func (w *engineWatch) check(ctx context.Context) {
	s := w.svc
	nodes, err := s.backend.Inventory(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading the backend's inventory; node health is read again at the next poll", "backend", s.backend.Name(), "err", err)
		}
		return
	}
	failed := map[string]string{} // node → the engine's reason
	if hr, ok := s.backend.(backend.HealthReporter); ok {
		recs, err := hr.NodeHealth(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("reading the backend's node health; it is read again at the next poll", "backend", s.backend.Name(), "err", err)
			}
			return
		}
		for _, r := range recs {
			if r.Health == core.Unhealthy {
				failed[r.Node] = r.Reason
			}
		}
	}
	kept, _ := checkInventory(nodes, s.fleet.Types) // what the inventory check left out at start is not there
	reported := make(map[string]bool, len(kept))
	for _, n := range kept {
		reported[n.Name] = true
	}
	for _, h := range w.changes(reported, failed, isHealthReporter(s.backend)) {
		if _, err := s.SetNodeHealth(ctx, h); err != nil {
			if ctx.Err() == nil {
				s.log.Error("recording a node's health from the engine", "node", h.Node, "health", h.Health, "err", err)
			}
			continue
		}
		s.log.Info("the engine changed a node's health", "node", h.Node, "health", h.Health, "reason", h.Reason)
	}
	w.announceNew(kept)
}

// changes are the reports that bring the records in step with the
// engine: reported are the nodes of the inventory, failed those it says
// unhealthy, with its reasons. A backend that reports no health
// (knowsHealth false) recovers only the nodes recorded as missing from
// its inventory.
func (w *engineWatch) changes(reported map[string]bool, failed map[string]string, knowsHealth bool) []core.NodeHealth {
	s := w.svc
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []core.NodeHealth
	for _, n := range s.fleet.Nodes {
		cur := s.healthRecord(n.Name)
		reason, down := failed[n.Name]
		if !reported[n.Name] {
			reason, down = missingReason, true
		}
		switch {
		case down && cur.Health == core.Healthy:
			out = append(out, core.NodeHealth{Node: n.Name, Health: core.Unhealthy, Reason: reason, Source: core.HealthFromEngine})
		case !down && cur.Health == core.Unhealthy && cur.Source == core.HealthFromEngine && (knowsHealth || cur.Reason == missingReason):
			out = append(out, core.NodeHealth{Node: n.Name, Health: core.Healthy, Source: core.HealthFromEngine})
		}
	}
	return out
}

// announceNew logs, once per leader, each node of the inventory that the
// fleet does not hold.
func (w *engineWatch) announceNew(kept []core.Node) {
	s := w.svc
	s.mu.RLock()
	known := make(map[string]bool, len(s.fleet.Nodes))
	for _, n := range s.fleet.Nodes {
		known[n.Name] = true
	}
	s.mu.RUnlock()
	for _, n := range kept {
		if !known[n.Name] && !w.announced[n.Name] {
			w.announced[n.Name] = true
			s.log.Info("the backend reports a node the fleet does not hold yet; it is sold from the next start", "node", n.Name, "gpuModel", n.GPUModel, "zone", n.Zone)
		}
	}
}

func isHealthReporter(b backend.Backend) bool {
	_, ok := b.(backend.HealthReporter)
	return ok
}
