package contract

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"capblock/internal/core"
)

func principal(name, team string, role core.Role) core.Principal {
	return core.Principal{User: core.User{ID: "usr-" + name, Name: name, Team: team, Role: role}}
}

var (
	admin  = principal("root", "ops", core.RoleAdmin)
	member = principal("ada", "ml", core.RoleMember)
	viewer = principal("bob", "ml", core.RoleViewer)
)

func TestAuthorize(t *testing.T) {
	tests := map[string]struct {
		p       core.Principal
		need    core.Role
		wantErr string // "" for allowed
	}{
		"admin does what a member may": {p: admin, need: core.RoleMember},
		"member reads":                 {p: member, need: core.RoleViewer},
		"member buys":                  {p: member, need: core.RoleMember},
		"viewer reads":                 {p: viewer, need: core.RoleViewer},
		"viewer buys": {p: viewer, need: core.RoleMember,
			wantErr: "purchaseBlock needs the member role; user bob is a viewer"},
		"member acts as an admin": {p: member, need: core.RoleAdmin,
			wantErr: "purchaseBlock needs the admin role; user ada is a member"},
		"no role": {p: core.Principal{User: core.User{Name: "nobody"}}, need: core.RoleViewer,
			wantErr: "purchaseBlock needs the viewer role; user nobody is a "},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Authorize(tc.p, "purchaseBlock", tc.need)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr || !errors.Is(err, core.ErrForbidden) {
				t.Fatalf("got %v, want %q wrapping core.ErrForbidden", err, tc.wantErr)
			}
		})
	}
}

func TestScope(t *testing.T) {
	tests := map[string]struct {
		p    core.Principal
		want string
	}{
		"an admin sees every team": {p: admin, want: ""},
		"a member sees its team":   {p: member, want: "ml"},
		"a viewer sees its team":   {p: viewer, want: "ml"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Scope(tc.p); got != tc.want {
				t.Errorf("Scope = %q, want %q", got, tc.want)
			}
		})
	}
}

// teamSet is Teams over a fixed set of team ids.
type teamSet map[string]bool

func (s teamSet) Team(_ context.Context, scope, id string) (core.Team, error) {
	if !s[id] || (scope != "" && scope != id) {
		return core.Team{}, fmt.Errorf("%w: team %s", core.ErrNotFound, id)
	}
	return core.Team{ID: id}, nil
}

func TestTeamFor(t *testing.T) {
	teams := teamSet{"ops": true, "ml": true, "cv": true}
	tests := map[string]struct {
		p       core.Principal
		named   string
		want    string
		wantErr error
		wantMsg string
	}{
		"a member's own team by default": {p: member, want: "ml"},
		"a member names its own team":    {p: member, named: "ml", want: "ml"},
		"a member names another team": {p: member, named: "cv", wantErr: core.ErrForbidden,
			wantMsg: "forbidden: only an admin may act for another team"},
		"an admin's own team by default": {p: admin, want: "ops"},
		"an admin acts for a team":       {p: admin, named: "cv", want: "cv"},
		"an admin names no such team": {p: admin, named: "nlp", wantErr: core.ErrInvalidArgument,
			wantMsg: `invalid argument: team "nlp" does not exist (GET /v1/teams lists them)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := TeamFor(t.Context(), teams, tc.p, tc.named)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || err.Error() != tc.wantMsg {
					t.Fatalf("got %q, %v; want %q wrapping %v", got, err, tc.wantMsg, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
