package service

import (
	"time"

	"capblock/internal/core"
)

// Committed versions reach the index by two roads: this replica's own
// commits, when they settle, and the notices of every replica's commits
// (follow). They may cross: another replica's cancel of a block (version
// 3) can be noticed here before this replica's own extension of it
// (version 2) settles. The index never takes a version older than one it
// saw, the version at which a block left it (cancelled, ended) included:
// that is kept in gone for goneKept.

// goneKept is how long the version at which a block left the index is
// remembered: far longer than a commit's notice takes to arrive.
const goneKept = 10 * time.Minute

// goneVersion is the version at which a block left the index, and when.
type goneVersion struct {
	version int64
	at      time.Time
}

// indexCommitted indexes b, a committed version of a block, unless the
// index holds a later version of it or saw it leave at a later version.
// It reports whether it took b. Callers hold mu.
func (s *Service) indexCommitted(b core.Block) (bool, error) {
	if g, ok := s.gone[b.ID]; ok && g.version >= b.Version {
		return false, nil
	}
	if cur, ok := s.index.Block(b.ID); ok && !s.index.Assumed(b.ID) && cur.Version > b.Version {
		return false, nil
	}
	if !b.State.Live() {
		s.noteGone(b.ID, b.Version)
	}
	return true, s.index.Add(b)
}

// noteGone remembers that block id left the index at version, and
// forgets what is older than goneKept once many are remembered.
func (s *Service) noteGone(id string, version int64) {
	now := time.Now()
	if s.gone == nil {
		s.gone = map[string]goneVersion{}
	}
	if len(s.gone) >= 4096 {
		for k, g := range s.gone {
			if now.Sub(g.at) > goneKept {
				delete(s.gone, k)
			}
		}
	}
	s.gone[id] = goneVersion{version: version, at: now}
}

// knownVersion reports whether the index holds block id at version or
// later, or saw it leave at version or later. Callers hold mu, shared
// at least.
func (s *Service) knownVersion(id string, version int64) bool {
	if g, ok := s.gone[id]; ok && g.version >= version {
		return true
	}
	cur, ok := s.index.Block(id)
	return ok && cur.Version >= version
}
