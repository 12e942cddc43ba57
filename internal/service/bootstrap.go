package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"capblock/internal/auth"
	"capblock/internal/core"
	"capblock/internal/privatefile"
	"capblock/internal/store"
)

// OperatorsTeam is the team of the administrator made at first start.
const OperatorsTeam = "operators"

// ErrTokenFileExists is returned by Bootstrap when a database without
// users would get a first administrator, but the token file is already
// there: it belongs to another database or an earlier start, and is never
// replaced.
var ErrTokenFileExists = errors.New("the administrator's token file already exists")

// Bootstrap makes the first administrator when no user exists yet: a team
// "operators", a user "admin" and a token, written to tokenPath readable
// only by its owner. It reports whether it made them. The token file is
// written before the administrator is stored, and never over an existing
// file: a second server started beside the first, or on another
// database, cannot take the first one's token file away.
func (s *Service) Bootstrap(ctx context.Context, tokenPath string) (bool, error) {
	// 1. Only a database without users gets a first administrator.
	users, err := s.store.Users(ctx, "")
	if err != nil {
		return false, fmt.Errorf("listing users: %w", err)
	}
	if len(users) > 0 {
		return false, nil
	}
	// 2. The token file, new or nothing.
	token, hash := auth.New()
	if err := privatefile.WriteNew(tokenPath, []byte(token+"\n")); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if s.awaitUsers(ctx, tokenFileGrace) {
				return false, nil // another replica made the administrator meanwhile
			}
			return false, fmt.Errorf("%w: %s (the database has no users yet; move the file away, or choose another with --admin-token-file)", ErrTokenFileExists, tokenPath)
		}
		return false, fmt.Errorf("writing the administrator's token to %s: %w", tokenPath, err)
	}
	made := false
	defer func() {
		if !made {
			_ = os.Remove(tokenPath) // its token was never stored
		}
	}()
	// 3. The operators team, the administrator and the token's hash.
	now := s.clock.Now()
	team := core.Team{ID: newID("team"), Name: OperatorsTeam, CreatedAt: now}
	if err := s.store.CreateTeam(ctx, team); err != nil && !errors.Is(err, store.ErrConflict) {
		return false, fmt.Errorf("creating the operators team: %w", err)
	} else if err != nil {
		teams, lerr := s.store.Teams(ctx)
		if lerr != nil {
			return false, fmt.Errorf("listing teams: %w", lerr)
		}
		for _, t := range teams {
			if t.Name == OperatorsTeam {
				team = t
			}
		}
	}
	admin := core.User{ID: newID("usr"), Name: "admin", Team: team.ID, Role: core.RoleAdmin, CreatedAt: now}
	if err := s.store.CreateUser(ctx, admin); errors.Is(err, store.ErrConflict) {
		return false, nil // another replica starting at the same time made it
	} else if err != nil {
		return false, fmt.Errorf("creating the first administrator: %w", err)
	}
	if err := s.store.CreateToken(ctx, core.Token{ID: newID("tok"), User: admin.ID, Hash: hash, CreatedAt: now}); err != nil {
		return false, fmt.Errorf("creating the administrator's token: %w", err)
	}
	made = true
	return true, nil
}

// tokenFileGrace is how long a server that finds the token file already
// there waits for the replica that wrote it to store its administrator.
const tokenFileGrace = 5 * time.Second

// awaitUsers reports whether the store has a user within limit.
func (s *Service) awaitUsers(ctx context.Context, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if users, err := s.store.Users(ctx, ""); err == nil && len(users) > 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}
