package contract

import (
	"context"
	"fmt"

	"capblock/internal/core"
)

// Authorize checks that p may do action, which needs the role need. Each
// front end keeps the role of each of its operations beside its routes
// and calls Authorize with it before calling the Service; the check and
// its answer are the same for all. The error wraps core.ErrForbidden.
func Authorize(p core.Principal, action string, need core.Role) error {
	if p.User.Role.Allows(need) {
		return nil
	}
	return &roleError{action: action, need: need, user: p.User}
}

// roleError is a caller refused for its role. Its message is said to
// users as is, without the sentinel's prefix.
type roleError struct {
	action string
	need   core.Role
	user   core.User
}

func (e *roleError) Error() string {
	return fmt.Sprintf("%s needs the %s role; user %s is a %s", e.action, e.need, e.user.Name, e.user.Role)
}

func (e *roleError) Unwrap() error { return core.ErrForbidden }

// Scope is the team whose things p may see: "" (every team) for an
// admin, p's own team otherwise. It is the scope argument of the
// Service's calls.
func Scope(p core.Principal) string {
	if p.User.Role == core.RoleAdmin {
		return ""
	}
	return p.User.Team
}

// Teams finds a team in a scope; the Service is one.
type Teams interface {
	Team(ctx context.Context, scope, id string) (core.Team, error)
}

// TeamFor is the team that p buys for (a block, a plan) or makes a
// webhook for, given the team the request names, if any: p's own, or,
// for an admin, the named team, which must exist.
func TeamFor(ctx context.Context, teams Teams, p core.Principal, named string) (string, error) {
	if named == "" || named == p.User.Team {
		return p.User.Team, nil
	}
	if p.User.Role != core.RoleAdmin {
		return "", fmt.Errorf("%w: only an admin may act for another team", core.ErrForbidden)
	}
	if _, err := teams.Team(ctx, "", named); err != nil {
		return "", core.Invalidf("team %q does not exist (GET /v1/teams lists them)", named)
	}
	return named, nil
}
