package service

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// maxHealthReason bounds a node health record's reason, in characters:
// a line for an operator to read.
const maxHealthReason = 500

// Nodes returns the fleet's nodes with their health now and the record
// that says since when, why and who said so.
func (s *Service) Nodes() []contract.NodeView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]contract.NodeView, len(s.fleet.Nodes))
	for i, n := range s.fleet.Nodes {
		rec := s.health[n.Name]
		n.Health = s.healthOf(n.Name)
		out[i] = contract.NodeView{Node: n, Record: rec}
	}
	return out
}

// healthOf is a node's health as recorded: healthy when it never was.
// Callers hold mu (shared is enough).
func (s *Service) healthOf(node string) core.Health {
	if rec, ok := s.health[node]; ok {
		return rec.Health
	}
	return core.Healthy
}

// healthRecord is a node's record, or a healthy one with a zero Since
// when it was never recorded. Callers hold mu (shared is enough).
func (s *Service) healthRecord(node string) core.NodeHealth {
	if rec, ok := s.health[node]; ok {
		return rec
	}
	return core.NodeHealth{Node: node, Health: core.Healthy}
}

// readHealth reads the stored node health records, by node. It reads
// nothing that mu guards.
func (s *Service) readHealth(ctx context.Context) (map[string]core.NodeHealth, error) {
	recs, err := s.store.NodeHealth(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading node health: %w", err)
	}
	health := make(map[string]core.NodeHealth, len(recs))
	for _, r := range recs {
		health[r.Node] = r
	}
	return health, nil
}

// reloadHealth applies the node health that another replica committed:
// it reads the records without the lock, then brings every node of the
// index to its recorded health. When this replica committed health
// meanwhile, what was read may predate that commit: it is dropped, and
// the notice of that commit, which comes later, reloads again.
func (s *Service) reloadHealth(ctx context.Context) {
	s.mu.RLock()
	gen := s.healthGen
	s.mu.RUnlock()
	health, err := s.readHealth(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("loading the node health another replica stored", "err", err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthGen != gen {
		return
	}
	s.health = health
	s.syncIndexHealth()
}

// syncIndexHealth brings every node of the index to its recorded health.
// Callers hold mu.
func (s *Service) syncIndexHealth() {
	for _, n := range s.fleet.Nodes {
		if err := s.index.SetHealth(n.Name, s.healthOf(n.Name)); err != nil {
			s.log.Error("applying a node's recorded health", "node", n.Name, "err", err)
		}
	}
}

// overruled reports whether report h is ignored given the record cur: an
// engine's word that a node is healthy does not end an admin's fail.
func overruled(cur, h core.NodeHealth) bool {
	return h.Source == core.HealthFromEngine && h.Health == core.Healthy &&
		cur.Source == core.HealthFromAdmin && cur.Health == core.Unhealthy
}

// adminFailStands is the record report h makes of the record cur: h,
// but for an engine's word that a node failed that an admin failed
// already, which keeps the admin's reason and source. Recorded as the
// engine's, the fail would end at the engine's word that the node is
// healthy again (a node back in the inventory, reportMissing), which
// overruled keeps from ending an admin's.
func adminFailStands(cur, h core.NodeHealth) core.NodeHealth {
	if h.Source == core.HealthFromEngine && h.Health == core.Unhealthy &&
		cur.Source == core.HealthFromAdmin && cur.Health == core.Unhealthy {
		h.Reason, h.Source = cur.Reason, cur.Source
	}
	return h
}

// checkNodeHealth checks a report before it is decided on. An admin's
// reason must be printable and at most maxHealthReason characters; an
// engine's is made so (a backend's odd output must not lose a failure).
// A healthy node has no reason.
func checkNodeHealth(h core.NodeHealth) (core.NodeHealth, error) {
	if h.Health != core.Healthy && h.Health != core.Unhealthy {
		return h, core.Invalidf("node %s: unknown health %q (healthy or unhealthy)", h.Node, h.Health)
	}
	if !h.Source.Valid() {
		return h, core.Invalidf("node %s: unknown health source %q (engine or admin)", h.Node, h.Source)
	}
	if h.Health == core.Healthy {
		h.Reason = ""
		return h, nil
	}
	if h.Source == core.HealthFromEngine {
		h.Reason = cleanReason(h.Reason)
		return h, nil
	}
	if err := core.CheckPrintable("reason", h.Reason); err != nil {
		return h, err
	}
	if n := utf8.RuneCountInString(h.Reason); n > maxHealthReason {
		return h, core.Invalidf("reason: %d characters, at most %d", n, maxHealthReason)
	}
	return h, nil
}

// cleanReason makes an engine's reason printable (see core.CheckPrintable),
// each offending character replaced by U+FFFD, and cuts it to
// maxHealthReason characters.
func cleanReason(r string) string {
	r = strings.ToValidUTF8(r, "\uFFFD")
	if core.CheckPrintable("reason", r) != nil {
		r = strings.Map(func(c rune) rune {
			if core.CheckPrintable("reason", string(c)) != nil {
				return '\uFFFD'
			}
			return c
		}, r)
	}
	if utf8.RuneCountInString(r) > maxHealthReason {
		r = string([]rune(r)[:maxHealthReason])
	}
	return r
}

// Sells reports whether node is one of the fleet's nodes.
func (s *Service) Sells(node string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, n := range s.currentNodes() {
		if n.Name == node {
			return true
		}
	}
	return false
}
