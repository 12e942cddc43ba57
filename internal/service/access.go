package service

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"capblock/internal/auth"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Authenticate finds who a token belongs to. Unknown, revoked and expired
// tokens are all ErrUnauthenticated, with a reason.
func (s *Service) Authenticate(ctx context.Context, token string) (core.Principal, error) {
	type credential struct {
		token core.Token
		user  core.User
	}
	hash := auth.Hash(token)
	unknown := false // unknown tokens are not cached: the read always runs
	c, err := cachedRead(&s.accounts, "token:"+hash, false, func() (credential, error) {
		t, err := s.store.TokenByHash(ctx, hash)
		if err != nil {
			unknown = errors.Is(err, store.ErrNotFound)
			return credential{}, fmt.Errorf("looking up a token: %w", err)
		}
		u, err := s.store.User(ctx, t.User)
		if err != nil {
			return credential{}, fmt.Errorf("loading the user of token %s: %w", t.ID, err)
		}
		return credential{t, u}, nil
	})
	if unknown {
		return core.Principal{}, fmt.Errorf("%w: the token is not known to this server", core.ErrUnauthenticated)
	}
	if err != nil {
		return core.Principal{}, err
	}
	t := c.token
	now := s.clock.Now()
	switch {
	case !t.RevokedAt.IsZero():
		return core.Principal{}, fmt.Errorf("%w: token %s was revoked at %s", core.ErrUnauthenticated, t.ID, t.RevokedAt.Format(time.RFC3339))
	case !t.Usable(now):
		return core.Principal{}, fmt.Errorf("%w: token %s expired at %s", core.ErrUnauthenticated, t.ID, t.ExpiresAt.Format(time.RFC3339))
	}
	if err := s.checkEnabled(ctx, c.user); err != nil {
		return core.Principal{}, err
	}
	return core.Principal{User: c.user, TokenID: t.ID}, nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func checkName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return core.Invalidf("%s name %q: use 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", kind, name)
	}
	return nil
}

// CreateTeam makes a team.
func (s *Service) CreateTeam(ctx context.Context, name string) (core.Team, error) {
	if err := checkName("team", name); err != nil {
		return core.Team{}, err
	}
	t := core.Team{ID: newID("team"), Name: name, CreatedAt: s.clock.Now()}
	if err := s.store.CreateTeam(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return core.Team{}, fmt.Errorf("%w: a team named %q exists", core.ErrConflict, name)
		}
		return core.Team{}, fmt.Errorf("creating team %s: %w", name, err)
	}
	return t, nil
}

// Teams lists the teams in scope: all for an admin (scope ""), else one.
func (s *Service) Teams(ctx context.Context, scope string) ([]core.Team, error) {
	if scope != "" {
		t, err := s.Team(ctx, scope, scope)
		if err != nil {
			return nil, err
		}
		return []core.Team{t}, nil
	}
	teams, err := s.store.Teams(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing teams: %w", err)
	}
	return teams, nil
}

// Team returns a team in scope; another team is not found.
func (s *Service) Team(ctx context.Context, scope, id string) (core.Team, error) {
	if scope != "" && scope != id {
		return core.Team{}, fmt.Errorf("%w: team %s", core.ErrNotFound, id)
	}
	t, err := s.store.Team(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return core.Team{}, fmt.Errorf("%w: team %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Team{}, fmt.Errorf("loading team %s: %w", id, err)
	}
	return t, nil
}

// CreateUser makes a user of a team with a role.
func (s *Service) CreateUser(ctx context.Context, name, team string, role core.Role) (core.User, error) {
	if err := checkName("user", name); err != nil {
		return core.User{}, err
	}
	if !role.Valid() {
		return core.User{}, core.Invalidf("role %q: want admin, member or viewer", role)
	}
	if _, err := s.Team(ctx, "", team); err != nil {
		return core.User{}, core.Invalidf("team %q does not exist; create it with POST /v1/teams or capblock teams create", team)
	}
	u := core.User{ID: newID("usr"), Name: name, Team: team, Role: role, CreatedAt: s.clock.Now()}
	if err := s.store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return core.User{}, fmt.Errorf("%w: a user named %q exists", core.ErrConflict, name)
		}
		return core.User{}, fmt.Errorf("creating user %s: %w", name, err)
	}
	return u, nil
}

// Users lists the users in scope.
func (s *Service) Users(ctx context.Context, scope string) ([]core.User, error) {
	users, err := s.store.Users(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("listing users: %w", err)
	}
	return users, nil
}

// maxTokensPerUser bounds a user's live tokens (neither revoked nor
// expired). Rates are limited per user, so tokens buy no requests; the
// bound keeps a leaked token from filling the table with more of them,
// and a user's list of tokens short enough to review.
const maxTokensPerUser = 20

// CreateToken makes a token for a user: an admin for anyone, anyone else
// for themselves. The token itself is returned this once.
//
// A token never outlives the one that makes it: the request of a token
// that expires at T may ask for an expiry at T or before, and one that
// asks for none gets T. Otherwise a token meant to last an hour could
// mint one that lasts for ever. A user holds at most maxTokensPerUser
// live tokens; one more is a conflict, settled by revoking one.
func (s *Service) CreateToken(ctx context.Context, p core.Principal, userID string, expiresIn time.Duration) (core.Token, string, error) {
	// 1. May p, and does the user exist?
	if p.User.Role != core.RoleAdmin && p.User.ID != userID {
		return core.Token{}, "", fmt.Errorf("%w: user %s", core.ErrNotFound, userID)
	}
	if expiresIn < 0 {
		return core.Token{}, "", core.Invalidf("expiresIn %s is negative", expiresIn)
	}
	if _, err := s.store.User(ctx, userID); errors.Is(err, store.ErrNotFound) {
		return core.Token{}, "", fmt.Errorf("%w: user %s", core.ErrNotFound, userID)
	} else if err != nil {
		return core.Token{}, "", fmt.Errorf("loading user %s: %w", userID, err)
	}
	// 2. Until when: never beyond the token of the request.
	now := s.clock.Now()
	expiresAt, err := s.newTokenExpiry(ctx, p, now, expiresIn)
	if err != nil {
		return core.Token{}, "", err
	}
	// 3. Is there room?
	if n, err := s.liveTokens(ctx, userID, now, ""); err != nil {
		return core.Token{}, "", err
	} else if n >= maxTokensPerUser {
		return core.Token{}, "", tooManyTokens(userID)
	}
	// 4. Store it, then count again: a token made meanwhile elsewhere (on
	// another replica) may have taken the last place, and then this one
	// is revoked at once rather than left above the bound.
	secret, hash := auth.New()
	t := core.Token{ID: newID("tok"), User: userID, Hash: hash, CreatedAt: now, ExpiresAt: expiresAt}
	if err := s.store.CreateToken(ctx, t); err != nil {
		return core.Token{}, "", fmt.Errorf("creating a token for user %s: %w", userID, err)
	}
	if n, err := s.liveTokens(ctx, userID, now, t.ID); err != nil || n >= maxTokensPerUser {
		if rerr := s.store.RevokeToken(context.WithoutCancel(ctx), t.ID, now); rerr != nil {
			return core.Token{}, "", fmt.Errorf("revoking token %s, made beyond the bound of user %s: %w", t.ID, userID, rerr)
		}
		if err != nil {
			return core.Token{}, "", err
		}
		return core.Token{}, "", tooManyTokens(userID)
	}
	return t, secret, nil
}

// newTokenExpiry is when a token that p asks for at now, to last
// expiresIn (0: as long as may be), expires; zero for never.
func (s *Service) newTokenExpiry(ctx context.Context, p core.Principal, now time.Time, expiresIn time.Duration) (time.Time, error) {
	var limit time.Time // the expiry of p's token; zero for never
	// An access key (of the AWS protocols) never expires: like a token
	// that never does, it sets no limit.
	if p.TokenID != "" && !isAccessKey(p.TokenID) {
		own, err := s.store.Token(ctx, p.TokenID)
		if err != nil {
			return time.Time{}, fmt.Errorf("loading token %s of the request: %w", p.TokenID, err)
		}
		limit = own.ExpiresAt
	}
	switch {
	case expiresIn == 0:
		return limit, nil
	case !limit.IsZero() && now.Add(expiresIn).After(limit):
		return time.Time{}, core.Invalidf("expiresIn %s would outlive token %s, which makes the request and expires at %s: ask for %s or less, or leave expiresIn out to expire with it",
			expiresIn, p.TokenID, limit.UTC().Format(time.RFC3339), limit.Sub(now).Truncate(time.Second))
	}
	return now.Add(expiresIn), nil
}

// liveTokens counts the user's tokens usable at now, but for the one
// named except.
func (s *Service) liveTokens(ctx context.Context, userID string, now time.Time, except string) (int, error) {
	ts, err := s.store.Tokens(ctx, userID)
	if err != nil {
		return 0, fmt.Errorf("listing the tokens of user %s: %w", userID, err)
	}
	n := 0
	for _, t := range ts {
		if t.ID != except && t.Usable(now) {
			n++
		}
	}
	return n, nil
}

func tooManyTokens(userID string) error {
	return fmt.Errorf("%w: user %s holds %d live tokens, the most a user may; revoke one (DELETE /v1/tokens/{id}) or wait for one to expire",
		core.ErrConflict, userID, maxTokensPerUser)
}

// Tokens lists tokens: every token for an admin, one's own otherwise.
func (s *Service) Tokens(ctx context.Context, p core.Principal) ([]core.Token, error) {
	user := p.User.ID
	if p.User.Role == core.RoleAdmin {
		user = ""
	}
	ts, err := s.store.Tokens(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	return ts, nil
}

// RevokeToken revokes a token at once: an admin any, anyone else their own.
func (s *Service) RevokeToken(ctx context.Context, p core.Principal, id string) (core.Token, error) {
	t, err := s.store.Token(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.User.Role != core.RoleAdmin && t.User != p.User.ID) {
		return core.Token{}, fmt.Errorf("%w: token %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Token{}, fmt.Errorf("loading token %s: %w", id, err)
	}
	err = s.store.RevokeToken(ctx, id, s.clock.Now())
	s.accounts.forget() // the other replicas hear of it from the store
	if err != nil {
		return core.Token{}, fmt.Errorf("revoking token %s: %w", id, err)
	}
	return s.store.Token(ctx, id)
}

// RecordAudit stores one audit record; a failure is logged, not returned,
// since the request it records has already been answered.
func (s *Service) RecordAudit(ctx context.Context, r core.AuditRecord) {
	if r.Time.IsZero() {
		r.Time = s.clock.Now()
	}
	if err := s.store.AppendAudit(context.WithoutCancel(ctx), r); err != nil {
		s.log.Error("recording an audit record", "route", r.Route, "err", err)
	}
}

// Audit returns audit records after a cursor.
func (s *Service) Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error) {
	rs, err := s.store.Audit(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return rs, nil
}

// Workloads is the principal of a team's workloads: a viewer of the team,
// which reads the team's blocks and nothing else. An unknown or disabled
// team is refused.
func (s *Service) Workloads(ctx context.Context, team string) (core.Principal, error) {
	if team == "" {
		return core.Principal{}, fmt.Errorf("%w: no team named", core.ErrUnauthenticated)
	}
	t, err := s.store.Team(ctx, team)
	if errors.Is(err, store.ErrNotFound) {
		return core.Principal{}, fmt.Errorf("%w: team %s does not exist", core.ErrUnauthenticated, team)
	}
	if err != nil {
		return core.Principal{}, fmt.Errorf("loading team %s: %w", team, err)
	}
	if err := s.checkTeamEnabled(ctx, t.ID, core.ErrUnauthenticated); err != nil {
		return core.Principal{}, err
	}
	return core.Principal{User: core.User{ID: "workloads:" + t.ID, Name: "workloads of team " + t.Name, Team: t.ID, Role: core.RoleViewer}}, nil
}
