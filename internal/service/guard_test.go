package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// callEvery calls every method of contract.Service on g with ctx and the
// zero value of each other argument, whose string arguments (teams,
// scopes, ids) are all team, and reports each method's error.
func callEvery(t *testing.T, g contract.Service, ctx context.Context, team string) map[string]error {
	t.Helper()
	v := reflect.ValueOf(g)
	typ := reflect.TypeFor[contract.Service]()
	out := map[string]error{}
	for m := range typ.Methods() {
		if !m.IsExported() {
			continue
		}
		fn := v.MethodByName(m.Name)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for i := 1; i < fn.Type().NumIn(); i++ {
			arg := reflect.New(fn.Type().In(i)).Elem()
			setStrings(arg, team)
			args = append(args, arg)
		}
		res := fn.Call(args)
		errV := res[len(res)-1]
		var err error
		if !errV.IsNil() {
			err = errV.Interface().(error)
		}
		out[m.Name] = err
	}
	if len(out) < 60 {
		t.Fatalf("only %d methods called", len(out))
	}
	return out
}

// setStrings sets every string of v, and every string field of a struct
// v, to s, so that a request names the team (or scope) s.
func setStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() && f.Kind() == reflect.String {
				f.SetString(s)
			}
		}
	}
}

func newGuardService(t *testing.T) (*Service, *Guarded) {
	t.Helper()
	st := openHealthStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	svc := newHealthService(t, st, healthT0)
	return svc, svc.Guarded()
}

// TestNoPrincipalNoCall calls every method of the service's contract
// without a principal: each is refused as unauthenticated, before the
// use case runs (which, given zero arguments, would fail otherwise or
// answer).
func TestNoPrincipalNoCall(t *testing.T) {
	svc, g := newGuardService(t)
	ctx := context.Background()
	before := storeCounts(t, svc)
	for name, err := range callEvery(t, g, ctx, "") {
		if !errors.Is(err, core.ErrUnauthenticated) {
			t.Errorf("%s without a principal: %v, want unauthenticated", name, err)
		}
	}
	// A principal of no role, of an unknown role, or a user without an
	// id, is no principal either, or is refused for its role.
	for _, p := range []core.Principal{
		{},
		{User: core.User{Name: "nobody", Team: "t"}},
		{User: core.User{ID: "usr-x", Name: "x", Team: "t"}},
		{User: core.User{ID: "usr-x", Name: "x", Team: "t", Role: "owner"}},
	} {
		for name, err := range callEvery(t, g, contract.WithPrincipal(ctx, p), "t") {
			if !errors.Is(err, core.ErrUnauthenticated) && !errors.Is(err, core.ErrForbidden) {
				t.Errorf("%s as %+v: %v, want refused", name, p, err)
			}
		}
	}
	if after := storeCounts(t, svc); after != before {
		t.Errorf("refused calls changed the store: %s, then %s", before, after)
	}
}

// TestScopeFailsClosed: a non-admin whose call names no team, or another
// team, is refused by every use case of a team's things, and nothing is
// stored; an admin's names any.
func TestScopeFailsClosed(t *testing.T) {
	svc, g := newGuardService(t)
	before := storeCounts(t, svc)
	member := core.Principal{User: core.User{ID: "usr-ada", Name: "ada", Team: "ml", Role: core.RoleMember}}
	for _, team := range []string{"", "cv"} {
		errs := callEvery(t, g, contract.WithPrincipal(context.Background(), member), team)
		for name, err := range errs {
			r, _ := contract.RuleOf(contract.UseCase(name))
			switch {
			case r.Reach == contract.ReachTeam && !errors.Is(err, core.ErrForbidden):
				t.Errorf("%s naming team %q as a member of ml: %v, want forbidden", name, team, err)
			case r.Role == core.RoleAdmin && !errors.Is(err, core.ErrForbidden):
				t.Errorf("%s as a member: %v, want forbidden", name, err)
			}
		}
	}
	if after := storeCounts(t, svc); after != before {
		t.Errorf("refused calls changed the store: %s, then %s", before, after)
	}
}

// TestActForAnotherTeam: a member buys for its own team only; an admin
// for a team that exists.
func TestActForAnotherTeam(t *testing.T) {
	_, g := newGuardService(t)
	member := contract.WithPrincipal(context.Background(), core.Principal{User: core.User{ID: "usr-ada", Name: "ada", Team: "ml", Role: core.RoleMember}})
	admin := contract.WithPrincipal(context.Background(), core.Principal{User: core.User{ID: "usr-root", Name: "root", Team: "ops", Role: core.RoleAdmin}})
	_, _, err := g.Purchase(member, contract.PurchaseRequest{Team: "cv", OfferingID: "x"})
	if !errors.Is(err, core.ErrForbidden) || !strings.Contains(err.Error(), "only an admin may act for another team") {
		t.Errorf("a member buying for another team: %v", err)
	}
	_, err = g.CreateWebhook(admin, "no-such-team", "https://example.com/h", []string{"*"})
	if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), `team "no-such-team" does not exist`) {
		t.Errorf("an admin naming no such team: %v", err)
	}
}

// storeCounts summarises what the store holds: its blocks, teams and
// journals, and its audit records.
func storeCounts(t *testing.T, svc *Service) string {
	t.Helper()
	ctx := context.Background()
	blocks, err := svc.store.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatal(err)
	}
	teams, err := svc.store.Teams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	journals, err := svc.store.Journals(ctx, store.JournalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := svc.store.Audit(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("blocks %d, teams %d, journals %d, audit %d", len(blocks), len(teams), len(journals), len(audit))
}
