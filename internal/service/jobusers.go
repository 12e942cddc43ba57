package service

import (
	"context"
	"fmt"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// UIDRange is the range of user ids, First to Last, that teams' jobs run
// as: each team gets one of them, recorded in the store so that restarts
// and replicas agree, and the group of the same number. The zero range
// runs jobs as the server's own user, unisolated.
type UIDRange struct {
	First, Last int
}

// IsZero reports whether r is the zero range.
func (r UIDRange) IsZero() bool { return r == UIDRange{} }

// CheckJobsDirReachable checks that users other than the server's may
// pass through every directory above the jobs directory dir, as jobs run
// as users of their own must (backend.CheckJobsDirReachable).
func CheckJobsDirReachable(dir string) error { return backend.CheckJobsDirReachable(dir) }

// jobUser is the user and group that the team's jobs run as, nil when
// jobs run as the server's user.
func (s *Service) jobUser(ctx context.Context, team string) (*backend.User, error) {
	r := s.jobs.uids
	if r.IsZero() {
		return nil, nil
	}
	s.jobs.mu.Lock()
	uid, ok := s.jobs.teamUIDs[team]
	s.jobs.mu.Unlock()
	if !ok {
		var err error
		if uid, err = s.store.TeamUID(ctx, team, r.First, r.Last); err != nil {
			return nil, fmt.Errorf("allocating the user of team %s's jobs: %w", team, err)
		}
		s.jobs.mu.Lock()
		s.jobs.teamUIDs[team] = uid
		s.jobs.mu.Unlock()
	}
	return &backend.User{UID: uint32(uid), GID: uint32(uid)}, nil
}

// jobsOffError is CreateJob's answer on a server that runs no jobs.
func (s *Service) jobsOffError() error {
	if s.jobsOff != "" {
		return core.Invalidf("this server runs no jobs: %s", s.jobsOff)
	}
	return core.Invalidf("this server runs no jobs (it has no jobs directory)")
}
