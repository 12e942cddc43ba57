package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/core"
	"capblock/internal/store"
)

// accountsTests check the methods of store.Accounts.
var accountsTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"Teams", testTeams},
	{"Users", testUsers},
	{"Tokens", testTokens},
	{"RevokeToken", testRevokeToken},
	{"Quotas", testQuotas},
	{"Budgets", testBudgets},
	{"Audit", testAudit},
	{"AuditInCommit", testAuditInCommit},
	{"AccountsReopen", testAccountsReopen},
	{"Disabled", testDisabled},
}

func makeTeam(id, name string) core.Team {
	return core.Team{ID: id, Name: name, CreatedAt: hour(-48)}
}

func makeUser(id, name, team string, role core.Role) core.User {
	return core.User{ID: id, Name: name, Team: team, Role: role, CreatedAt: hour(-24)}
}

func makeToken(id, user, hash string, created time.Time) core.Token {
	return core.Token{ID: id, User: user, Hash: hash, CreatedAt: created}
}

// mustDo fails the test on err.
func mustDo(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr fails the test unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantTeams fails the test unless Teams returns want.
func wantTeams(t *testing.T, s store.Full, want []core.Team) {
	t.Helper()
	got, err := s.Teams(t.Context())
	mustDo(t, "Teams", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Teams (-want +got):\n%s", diff)
	}
}

func testTeams(t *testing.T, h Harness) {
	s := h.Open(t)
	wantTeams(t, s, nil)
	_, err := s.Team(t.Context(), "t1")
	wantErr(t, "Team of an empty store", err, store.ErrNotFound)

	zeta, alpha, mid := makeTeam("t1", "zeta"), makeTeam("t2", "alpha"), makeTeam("t3", "mid")
	// Times in another zone are the same instants.
	mid.CreatedAt = mid.CreatedAt.In(time.FixedZone("CET", 3600))
	for _, team := range []core.Team{zeta, alpha, mid} {
		mustDo(t, "CreateTeam("+team.ID+")", s.CreateTeam(t.Context(), team))
	}
	wantTeams(t, s, []core.Team{alpha, mid, zeta})
	got, err := s.Team(t.Context(), "t3")
	mustDo(t, "Team(t3)", err)
	if diff := cmp.Diff(mid, got); diff != "" {
		t.Errorf("Team(t3) (-want +got):\n%s", diff)
	}
	_, err = s.Team(t.Context(), "t4")
	wantErr(t, "Team of an unknown id", err, store.ErrNotFound)

	// Ids and names are both unique.
	err = s.CreateTeam(t.Context(), makeTeam("t1", "other"))
	wantErr(t, "CreateTeam with a duplicate id", err, store.ErrConflict)
	err = s.CreateTeam(t.Context(), makeTeam("t4", "alpha"))
	wantErr(t, "CreateTeam with a duplicate name", err, store.ErrConflict)
	wantTeams(t, s, []core.Team{alpha, mid, zeta})
	_, err = s.Team(t.Context(), "t4")
	wantErr(t, "Team of a refused team", err, store.ErrNotFound)
}

// wantUsers fails the test unless Users(team) returns want.
func wantUsers(t *testing.T, s store.Full, team string, want []core.User) {
	t.Helper()
	got, err := s.Users(t.Context(), team)
	mustDo(t, "Users("+team+")", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Users(%q) (-want +got):\n%s", team, diff)
	}
}

func testUsers(t *testing.T, h Harness) {
	s := h.Open(t)
	mustDo(t, "CreateTeam", s.CreateTeam(t.Context(), makeTeam("t1", "one")))
	mustDo(t, "CreateTeam", s.CreateTeam(t.Context(), makeTeam("t2", "two")))
	wantUsers(t, s, "", nil)
	_, err := s.User(t.Context(), "u1")
	wantErr(t, "User of an empty store", err, store.ErrNotFound)

	carol := makeUser("u1", "carol", "t1", core.RoleAdmin)
	alice := makeUser("u2", "alice", "t2", core.RoleMember)
	bob := makeUser("u3", "bob", "t1", core.RoleViewer)
	for _, u := range []core.User{carol, alice, bob} {
		mustDo(t, "CreateUser("+u.ID+")", s.CreateUser(t.Context(), u))
	}
	wantUsers(t, s, "", []core.User{alice, bob, carol})
	wantUsers(t, s, "t1", []core.User{bob, carol})
	wantUsers(t, s, "t2", []core.User{alice})
	wantUsers(t, s, "t9", nil)
	got, err := s.User(t.Context(), "u2")
	mustDo(t, "User(u2)", err)
	if diff := cmp.Diff(alice, got); diff != "" {
		t.Errorf("User(u2) (-want +got):\n%s", diff)
	}
	_, err = s.User(t.Context(), "u9")
	wantErr(t, "User of an unknown id", err, store.ErrNotFound)

	err = s.CreateUser(t.Context(), makeUser("u1", "dave", "t1", core.RoleMember))
	wantErr(t, "CreateUser with a duplicate id", err, store.ErrConflict)
	// A name is taken across teams.
	err = s.CreateUser(t.Context(), makeUser("u4", "carol", "t2", core.RoleMember))
	wantErr(t, "CreateUser with a name already used", err, store.ErrConflict)
	err = s.CreateUser(t.Context(), makeUser("u5", "erin", "t9", core.RoleMember))
	wantErr(t, "CreateUser in an unknown team", err, store.ErrNotFound)
	wantUsers(t, s, "", []core.User{alice, bob, carol})
	wantUsers(t, s, "t9", nil)
}

// wantTokens fails the test unless Tokens(user) returns want.
func wantTokens(t *testing.T, s store.Full, user string, want []core.Token) {
	t.Helper()
	got, err := s.Tokens(t.Context(), user)
	mustDo(t, "Tokens("+user+")", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Tokens(%q) (-want +got):\n%s", user, diff)
	}
}

// wantToken fails the test unless Token(want.ID) and TokenByHash(want.Hash)
// return want.
func wantToken(t *testing.T, s store.Full, want core.Token) {
	t.Helper()
	got, err := s.Token(t.Context(), want.ID)
	mustDo(t, "Token("+want.ID+")", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Token(%s) (-want +got):\n%s", want.ID, diff)
	}
	got, err = s.TokenByHash(t.Context(), want.Hash)
	mustDo(t, "TokenByHash("+want.Hash+")", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TokenByHash(%s) (-want +got):\n%s", want.Hash, diff)
	}
}

// tokenFixture stores team t1 with users u1 and u2.
func tokenFixture(t *testing.T, h Harness) store.Full {
	s := h.Open(t)
	mustDo(t, "CreateTeam", s.CreateTeam(t.Context(), makeTeam("t1", "one")))
	mustDo(t, "CreateUser", s.CreateUser(t.Context(), makeUser("u1", "ann", "t1", core.RoleMember)))
	mustDo(t, "CreateUser", s.CreateUser(t.Context(), makeUser("u2", "ben", "t1", core.RoleAdmin)))
	return s
}

func testTokens(t *testing.T, h Harness) {
	s := tokenFixture(t, h)
	wantTokens(t, s, "", nil)
	_, err := s.Token(t.Context(), "k1")
	wantErr(t, "Token of an empty store", err, store.ErrNotFound)
	_, err = s.TokenByHash(t.Context(), "sha256:1")
	wantErr(t, "TokenByHash of an empty store", err, store.ErrNotFound)

	// Zero ExpiresAt and RevokedAt (never, not revoked) read back as zero.
	k1 := makeToken("k1", "u1", "sha256:1", hour(2))
	k2 := makeToken("k2", "u2", "sha256:2", hour(0))
	k2.ExpiresAt = hour(100)
	k3 := makeToken("k3", "u1", "sha256:3", hour(1))
	k3.ExpiresAt, k3.RevokedAt = hour(50), hour(3)
	for _, k := range []core.Token{k1, k2, k3} {
		mustDo(t, "CreateToken("+k.ID+")", s.CreateToken(t.Context(), k))
	}
	wantTokens(t, s, "", []core.Token{k2, k3, k1})
	wantTokens(t, s, "u1", []core.Token{k3, k1})
	wantTokens(t, s, "u9", nil)
	for _, k := range []core.Token{k1, k2, k3} {
		wantToken(t, s, k)
	}
	got, err := s.Token(t.Context(), "k1")
	mustDo(t, "Token(k1)", err)
	if !got.ExpiresAt.IsZero() || !got.RevokedAt.IsZero() {
		t.Errorf("Token(k1) = %+v, want zero ExpiresAt and RevokedAt", got)
	}
	_, err = s.Token(t.Context(), "k9")
	wantErr(t, "Token of an unknown id", err, store.ErrNotFound)
	_, err = s.TokenByHash(t.Context(), "sha256:9")
	wantErr(t, "TokenByHash of an unknown hash", err, store.ErrNotFound)

	err = s.CreateToken(t.Context(), makeToken("k1", "u2", "sha256:4", hour(4)))
	wantErr(t, "CreateToken with a duplicate id", err, store.ErrConflict)
	err = s.CreateToken(t.Context(), makeToken("k4", "u2", "sha256:2", hour(4)))
	wantErr(t, "CreateToken with a duplicate hash", err, store.ErrConflict)
	err = s.CreateToken(t.Context(), makeToken("k5", "u9", "sha256:5", hour(4)))
	wantErr(t, "CreateToken of an unknown user", err, store.ErrNotFound)
	wantTokens(t, s, "", []core.Token{k2, k3, k1})
	_, err = s.TokenByHash(t.Context(), "sha256:4")
	wantErr(t, "TokenByHash of a refused token", err, store.ErrNotFound)
}

func testRevokeToken(t *testing.T, h Harness) {
	s := tokenFixture(t, h)
	k1 := makeToken("k1", "u1", "sha256:1", hour(0))
	k2 := makeToken("k2", "u1", "sha256:2", hour(1))
	mustDo(t, "CreateToken", s.CreateToken(t.Context(), k1))
	mustDo(t, "CreateToken", s.CreateToken(t.Context(), k2))

	mustDo(t, "RevokeToken", s.RevokeToken(t.Context(), "k1", hour(5)))
	k1.RevokedAt = hour(5)
	wantToken(t, s, k1)
	wantToken(t, s, k2) // untouched
	// Revoking again keeps the first time.
	mustDo(t, "RevokeToken again", s.RevokeToken(t.Context(), "k1", hour(9)))
	wantToken(t, s, k1)
	if got, err := s.TokenByHash(t.Context(), k1.Hash); err != nil || got.Usable(hour(6)) {
		t.Errorf("TokenByHash of a revoked token = %+v, %v; want it not usable", got, err)
	}
	err := s.RevokeToken(t.Context(), "k9", hour(5))
	wantErr(t, "RevokeToken of an unknown id", err, store.ErrNotFound)
	wantTokens(t, s, "u1", []core.Token{k1, k2})
}

// wantQuotas fails the test unless Quotas(team) returns want.
func wantQuotas(t *testing.T, s store.Full, team string, want []core.Quota) {
	t.Helper()
	got, err := s.Quotas(t.Context(), team)
	mustDo(t, "Quotas("+team+")", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("Quotas(%q) (-want +got):\n%s", team, diff)
	}
}

func testQuotas(t *testing.T, h Harness) {
	s := h.Open(t)
	wantQuotas(t, s, "team-a", nil)
	q := func(team, typ string, perBlock, held, durHours, leadHours int) core.Quota {
		return core.Quota{Team: team, InstanceType: typ, MaxInstancesPerBlock: perBlock, MaxInstancesHeld: held,
			MaxDuration: time.Duration(durHours) * time.Hour, MaxLead: time.Duration(leadHours) * time.Hour}
	}
	h100 := q("team-a", "h100.8x", 4, 16, 24*14, 24*7)
	all := q("team-a", "", 8, 64, 24*182, 24*56)
	a100 := q("team-a", "a100.1x", 0, 0, 0, 0) // zero: no limit
	other := q("team-b", "", 1, 1, 1, 1)
	for _, quota := range []core.Quota{h100, all, a100, other} {
		mustDo(t, "PutQuota", s.PutQuota(t.Context(), quota))
	}
	wantQuotas(t, s, "team-a", []core.Quota{all, a100, h100})
	wantQuotas(t, s, "team-b", []core.Quota{other})

	// A second quota for a (team, type) pair replaces the first.
	h100 = q("team-a", "h100.8x", 2, 8, 48, 24)
	all = q("team-a", "", 1, 2, 3, 4)
	mustDo(t, "PutQuota", s.PutQuota(t.Context(), h100))
	mustDo(t, "PutQuota", s.PutQuota(t.Context(), all))
	wantQuotas(t, s, "team-a", []core.Quota{all, a100, h100})
	wantQuotas(t, s, "team-b", []core.Quota{other})
	wantQuotas(t, s, "team-c", nil)
}

func testBudgets(t *testing.T, h Harness) {
	s := h.Open(t)
	_, err := s.Budget(t.Context(), "team-a")
	wantErr(t, "Budget of a team without one", err, store.ErrNotFound)

	monthly := core.Budget{Team: "team-a", Amount: core.Money{Minor: 1_000_000, Currency: "USD"}, Period: core.BudgetMonth}
	mustDo(t, "PutBudget", s.PutBudget(t.Context(), monthly))
	wantBudget := func(want core.Budget) {
		t.Helper()
		got, err := s.Budget(t.Context(), want.Team)
		mustDo(t, "Budget("+want.Team+")", err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Budget(%s) (-want +got):\n%s", want.Team, diff)
		}
	}
	wantBudget(monthly)
	// The next one replaces it.
	total := core.Budget{Team: "team-a", Amount: core.Money{Minor: 250, Currency: "EUR"}, Period: core.BudgetTotal}
	mustDo(t, "PutBudget", s.PutBudget(t.Context(), total))
	wantBudget(total)
	_, err = s.Budget(t.Context(), "team-b")
	wantErr(t, "Budget of another team", err, store.ErrNotFound)
	none := core.Budget{Team: "team-b", Period: core.BudgetNone}
	mustDo(t, "PutBudget", s.PutBudget(t.Context(), none))
	wantBudget(none)
	wantBudget(total)
}

func testAudit(t *testing.T, h Harness) {
	s := h.Open(t)
	none, err := s.Audit(t.Context(), 0, 10)
	mustDo(t, "Audit", err)
	if len(none) != 0 {
		t.Fatalf("Audit of an empty store = %+v, want none", none)
	}
	records := []core.AuditRecord{
		{Time: hour(0), User: "u1", Team: "t1", TokenID: "k1", Method: "POST", Route: "/v1/blocks",
			Subject: "cb-1", Status: 201, Outcome: "created"},
		{Time: hour(0), User: "u2", Team: "t2", TokenID: "k2", Method: "DELETE", Route: "/v1/blocks/{id}",
			Subject: "cb-1", Status: 403, Outcome: "forbidden"},
		// A request that authenticated no one.
		{Time: hour(-1), Method: "POST", Route: "/v1/blocks", Status: 401, Outcome: "unauthenticated"},
		{Time: hour(2), User: "u1", Team: "t1", TokenID: "k1", Method: "PATCH", Route: "/v1/teams/{id}/budget",
			Subject: "t1", Status: 200, Outcome: "ok"},
	}
	for _, r := range records {
		mustDo(t, "AppendAudit", s.AppendAudit(t.Context(), r))
	}
	all, err := s.Audit(t.Context(), 0, 100)
	mustDo(t, "Audit", err)
	ignoreSeq := cmpopts.IgnoreFields(core.AuditRecord{}, "Seq")
	if diff := cmp.Diff(records, all, ignoreSeq); diff != "" {
		t.Fatalf("Audit (-want +got):\n%s", diff)
	}
	if all[0].Seq <= 0 {
		t.Fatalf("first Seq is %d, want > 0", all[0].Seq)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("Seq does not increase: %d then %d", all[i-1].Seq, all[i].Seq)
		}
	}

	tests := map[string]struct {
		after int64
		limit int
		want  []core.AuditRecord
	}{
		"after the first":    {after: all[0].Seq, limit: 10, want: all[1:]},
		"limit":              {after: 0, limit: 2, want: all[:2]},
		"after and limit":    {after: all[1].Seq, limit: 1, want: all[2:3]},
		"no limit":           {after: all[0].Seq, limit: 0, want: all[1:]},
		"after the last":     {after: all[3].Seq, limit: 10},
		"after a future seq": {after: all[3].Seq + 1000, limit: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Audit(t.Context(), tc.after, tc.limit)
			mustDo(t, "Audit", err)
			if diff := cmp.Diff(tc.want, got, cmpOpts...); diff != "" {
				t.Errorf("Audit(%d, %d) (-want +got):\n%s", tc.after, tc.limit, diff)
			}
		})
	}

	// A later record follows the last one.
	mustDo(t, "AppendAudit", s.AppendAudit(t.Context(), records[0]))
	later, err := s.Audit(t.Context(), all[3].Seq, 10)
	mustDo(t, "Audit", err)
	if len(later) != 1 || later[0].Seq <= all[3].Seq {
		t.Fatalf("Audit after the last = %+v, want one record with Seq > %d", later, all[3].Seq)
	}
}

// testAuditInCommit stores audit records with a change (Change.Audit):
// after a commit they follow the records appended before, and a refused
// commit stores none.
func testAuditInCommit(t *testing.T, h Harness) {
	s := h.Open(t)
	before := core.AuditRecord{Time: hour(0), User: "u1", Team: "t1", TokenID: "k1", Method: "DELETE",
		Route: "/v1/tokens/{id}", Subject: "k2", Status: 200, Outcome: "ok"}
	mustDo(t, "AppendAudit", s.AppendAudit(t.Context(), before))
	buy := core.AuditRecord{Time: hour(1), User: "u1", Team: "t1", TokenID: "k1", Method: "POST",
		Route: "/v1/blocks", Status: 201, Outcome: "ok"}
	a := makeBlock("cb-a").on("n1", 0).obj()
	mustCommit(t, s, store.Change{Insert: []core.Block{a}, Audit: []core.AuditRecord{buy}})
	// The same GPU again: refused, and its record with it.
	refused := buy
	refused.Time = hour(2)
	wantConflict(t, s, store.Change{Insert: []core.Block{makeBlock("cb-b").on("n1", 0).obj()}, Audit: []core.AuditRecord{refused}})

	got, err := s.Audit(t.Context(), 0, 10)
	mustDo(t, "Audit", err)
	ignoreSeq := cmpopts.IgnoreFields(core.AuditRecord{}, "Seq")
	if diff := cmp.Diff([]core.AuditRecord{before, buy}, got, ignoreSeq); diff != "" {
		t.Fatalf("Audit (-want +got):\n%s", diff)
	}
	if got[1].Seq <= got[0].Seq {
		t.Errorf("the commit's record has seq %d, not after %d", got[1].Seq, got[0].Seq)
	}
}

func testAccountsReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	team := makeTeam("t1", "one")
	user := makeUser("u1", "ann", "t1", core.RoleMember)
	token := makeToken("k1", "u1", "sha256:1", hour(0))
	token.ExpiresAt = hour(24)
	quota := core.Quota{Team: "t1", InstanceType: "h100.8x", MaxInstancesPerBlock: 2, MaxInstancesHeld: 4,
		MaxDuration: 48 * time.Hour, MaxLead: 24 * time.Hour}
	budget := core.Budget{Team: "t1", Amount: core.Money{Minor: 99_900, Currency: "USD"}, Period: core.BudgetMonth}
	record := core.AuditRecord{Time: hour(1), User: "u1", Team: "t1", TokenID: "k1", Method: "POST",
		Route: "/v1/blocks", Subject: "cb-1", Status: 201, Outcome: "created"}
	mustDo(t, "CreateTeam", s.CreateTeam(t.Context(), team))
	mustDo(t, "CreateUser", s.CreateUser(t.Context(), user))
	mustDo(t, "CreateToken", s.CreateToken(t.Context(), token))
	mustDo(t, "RevokeToken", s.RevokeToken(t.Context(), "k1", hour(2)))
	token.RevokedAt = hour(2)
	mustDo(t, "PutQuota", s.PutQuota(t.Context(), quota))
	mustDo(t, "PutBudget", s.PutBudget(t.Context(), budget))
	mustDo(t, "AppendAudit", s.AppendAudit(t.Context(), record))
	before, err := s.Audit(t.Context(), 0, 10)
	mustDo(t, "Audit", err)

	s = h.Reopen(t, s)
	wantTeams(t, s, []core.Team{team})
	wantUsers(t, s, "t1", []core.User{user})
	wantToken(t, s, token)
	wantQuotas(t, s, "t1", []core.Quota{quota})
	gotBudget, err := s.Budget(t.Context(), "t1")
	mustDo(t, "Budget", err)
	if diff := cmp.Diff(budget, gotBudget); diff != "" {
		t.Errorf("Budget after reopen (-want +got):\n%s", diff)
	}
	after, err := s.Audit(t.Context(), 0, 10)
	mustDo(t, "Audit", err)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("Audit after reopen (-before +after):\n%s", diff)
	}
	// Seq is never reused.
	mustDo(t, "AppendAudit", s.AppendAudit(t.Context(), record))
	next, err := s.Audit(t.Context(), before[0].Seq, 10)
	mustDo(t, "Audit", err)
	if len(next) != 1 || next[0].Seq <= before[0].Seq {
		t.Fatalf("Audit after reopen = %+v, want one new record after Seq %d", next, before[0].Seq)
	}
}
