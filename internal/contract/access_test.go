package contract

import (
	"context"
	"errors"
	"reflect"
	"slices"
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

// TestEveryMethodHasARule: the access table and the Service's methods are
// the same set, so a new method cannot be left open (nor a rule left
// behind a removed one).
func TestEveryMethodHasARule(t *testing.T) {
	svc := reflect.TypeFor[Service]()
	var methods []UseCase
	for m := range svc.Methods() {
		if m.IsExported() {
			methods = append(methods, UseCase(m.Name))
		}
	}
	slices.Sort(methods)
	for _, m := range methods {
		r, ok := RuleOf(m)
		if !ok {
			t.Errorf("Service.%s has no rule in the access table: add one to access (contract/access.go)", m)
			continue
		}
		if !r.Role.Valid() || r.Reach == reachNone {
			t.Errorf("Service.%s has the rule %+v, which names no role or no reach", m, r)
		}
	}
	for _, uc := range UseCases() {
		if !slices.Contains(methods, uc) {
			t.Errorf("the access table names %s, which is no method of Service", uc)
		}
	}
}

func TestAuthorize(t *testing.T) {
	type call struct {
		uc   UseCase
		team string // for AuthorizeTeam; "-" calls Authorize
	}
	tests := map[string]struct {
		ctx     context.Context
		call    call
		wantErr error  // nil: allowed
		wantMsg string // the refusal's message, when wanted
	}{
		"no principal": {ctx: context.Background(), call: call{"ListBlocks", "ml"},
			wantErr: core.ErrUnauthenticated, wantMsg: "unauthenticated: ListBlocks needs a caller, and this call names none"},
		"the zero principal": {ctx: WithPrincipal(context.Background(), core.Principal{}), call: call{"Fleet", "-"},
			wantErr: core.ErrUnauthenticated},
		"a viewer reads its team":  {ctx: as(viewer), call: call{"ListBlocks", "ml"}},
		"a viewer reads the fleet": {ctx: as(viewer), call: call{"Fleet", "-"}},
		"a viewer buys": {ctx: as(viewer), call: call{"Purchase", "ml"}, wantErr: core.ErrForbidden,
			wantMsg: "Purchase needs the member role; user bob is a viewer"},
		"a member buys for its team": {ctx: as(member), call: call{"Purchase", "ml"}},
		"a member buys for another team": {ctx: as(member), call: call{"Purchase", "cv"}, wantErr: core.ErrForbidden,
			wantMsg: "forbidden: only an admin may act for another team"},
		"a member's scope names no team": {ctx: as(member), call: call{"ListBlocks", ""}, wantErr: core.ErrForbidden,
			wantMsg: "forbidden: ListBlocks names no team, and only an admin acts on every team"},
		"an admin reads every team":    {ctx: as(admin), call: call{"ListBlocks", ""}},
		"an admin acts for a team":     {ctx: as(admin), call: call{"CancelBlock", "cv"}},
		"a member acts as an admin":    {ctx: as(member), call: call{"FailNode", "-"}, wantErr: core.ErrForbidden},
		"an admin acts as an admin":    {ctx: as(admin), call: call{"FailNode", "-"}},
		"a viewer's own tokens":        {ctx: as(viewer), call: call{"CreateToken", "-"}},
		"a use case without a rule":    {ctx: as(admin), call: call{"DropDatabase", "-"}, wantErr: core.ErrForbidden},
		"a team's use case, no team":   {ctx: as(admin), call: call{"ListBlocks", "-"}, wantErr: core.ErrForbidden},
		"a role that is none of ours":  {ctx: as(principal("eve", "ml", "owner")), call: call{"Fleet", "-"}, wantErr: core.ErrForbidden},
		"a user without a role":        {ctx: as(principal("eve", "ml", "")), call: call{"Fleet", "-"}, wantErr: core.ErrForbidden},
		"a member of no team":          {ctx: as(principal("eve", "", core.RoleMember)), call: call{"ListBlocks", ""}, wantErr: core.ErrForbidden},
		"a member of no team, fleet":   {ctx: as(principal("eve", "", core.RoleMember)), call: call{"Fleet", "-"}, wantErr: core.ErrForbidden},
		"an admin of no team":          {ctx: as(principal("root", "", core.RoleAdmin)), call: call{"ListBlocks", ""}},
		"a member's team-scoped write": {ctx: as(member), call: call{"StopJob", "ml"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.call.team == "-" {
				_, err = Authorize(tc.ctx, tc.call.uc)
			} else {
				_, err = AuthorizeTeam(tc.ctx, tc.call.uc, tc.call.team)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want an error wrapping %v", err, tc.wantErr)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Fatalf("got %q, want %q", err, tc.wantMsg)
			}
		})
	}
}

// TestPermitted: the role alone, whatever the reach.
func TestPermitted(t *testing.T) {
	if err := Permitted(as(viewer), "ListBlocks"); err != nil {
		t.Errorf("a viewer may list blocks: %v", err)
	}
	if err := Permitted(as(viewer), "Purchase"); !errors.Is(err, core.ErrForbidden) {
		t.Errorf("a viewer buying: %v, want forbidden", err)
	}
	if err := Permitted(context.Background(), "Fleet"); !errors.Is(err, core.ErrUnauthenticated) {
		t.Errorf("no principal: %v, want unauthenticated", err)
	}
}

func as(p core.Principal) context.Context { return WithPrincipal(context.Background(), p) }

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

func TestTeamOf(t *testing.T) {
	if got := TeamOf(member, ""); got != "ml" {
		t.Errorf("a member's own team by default: %q", got)
	}
	if got := TeamOf(member, "cv"); got != "cv" {
		t.Errorf("the named team: %q", got)
	}
}
