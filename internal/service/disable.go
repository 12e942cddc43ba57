package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// SetUserDisabled disables a user (disabled) or enables it again, as an
// administrator p. A disabled user's tokens and access keys stop
// authenticating on every replica as soon as a revoked token does; they
// are kept, and work again once the user is enabled. An administrator
// cannot disable themself: the last one could lock every administrator
// out.
func (s *Service) SetUserDisabled(ctx context.Context, p core.Principal, id string, disabled bool) (core.User, error) {
	if disabled && id == p.User.ID {
		return core.User{}, fmt.Errorf("%w: you cannot disable yourself; another administrator can", core.ErrInvalidState)
	}
	err := s.store.SetUserDisabled(ctx, id, disabledAt(disabled, s.clock.Now()))
	s.accounts.forget() // the other replicas hear of it from the store
	if errors.Is(err, store.ErrNotFound) {
		return core.User{}, fmt.Errorf("%w: user %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.User{}, fmt.Errorf("disabling user %s: %w", id, err)
	}
	return s.store.User(ctx, id)
}

// SetTeamDisabled disables a team (disabled) or enables it again, as an
// administrator p: its users cannot authenticate, and nothing is bought
// for it, not even by an administrator; its blocks, plans and jobs run on
// (they are paid for) and can be cancelled by an administrator. An
// administrator cannot disable their own team.
func (s *Service) SetTeamDisabled(ctx context.Context, p core.Principal, id string, disabled bool) (core.Team, error) {
	if disabled && id == p.User.Team {
		return core.Team{}, fmt.Errorf("%w: you cannot disable your own team; another team's administrator can", core.ErrInvalidState)
	}
	err := s.store.SetTeamDisabled(ctx, id, disabledAt(disabled, s.clock.Now()))
	s.accounts.forget() // the other replicas hear of it from the store
	if errors.Is(err, store.ErrNotFound) {
		return core.Team{}, fmt.Errorf("%w: team %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Team{}, fmt.Errorf("disabling team %s: %w", id, err)
	}
	return s.store.Team(ctx, id)
}

func disabledAt(disabled bool, now time.Time) time.Time {
	if disabled {
		return now
	}
	return time.Time{}
}

// checkEnabled refuses a credential of user u when u or u's team is
// disabled. Both are read through the accounts cache, which forgets them
// when they change.
func (s *Service) checkEnabled(ctx context.Context, u core.User) error {
	if !u.DisabledAt.IsZero() {
		return fmt.Errorf("%w: user %s was disabled at %s; an administrator can enable it", core.ErrUnauthenticated, u.Name, u.DisabledAt.Format(time.RFC3339))
	}
	return s.checkTeamEnabled(ctx, u.Team, core.ErrUnauthenticated)
}

// checkTeamEnabled returns an error wrapping sentinel when team is
// disabled.
func (s *Service) checkTeamEnabled(ctx context.Context, team string, sentinel error) error {
	t, err := cachedRead(&s.accounts, "team:"+team, true, func() (core.Team, error) {
		return s.store.Team(ctx, team)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // no such team, so not a disabled one: what asks says what it needs
	}
	if err != nil {
		return fmt.Errorf("loading team %s: %w", team, err)
	}
	if !t.DisabledAt.IsZero() {
		return fmt.Errorf("%w: team %s was disabled at %s; an administrator can enable it", sentinel, t.Name, t.DisabledAt.Format(time.RFC3339))
	}
	return nil
}
