package e2e

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"capblock/internal/api"
	"capblock/internal/core"
	"capblock/internal/service"
)

// guarded is the real stack, as start makes it, but with the API options
// of the test (a rate limit) and webhooks to non-public addresses refused.
// Its handler is also called directly, as if from client addresses of the
// test's choosing.
type guarded struct {
	*env
	handler http.Handler
}

func startGuarded(t *testing.T, opts api.Options) *guarded {
	t.Helper()
	e, h := startWith(t, testFleet, service.Config{}, opts)
	return &guarded{env: e, handler: h}
}

// user makes a user of a new team with a token, through the service, so
// that the admin's requests do not count against a rate limit.
func (g *guarded) user(name string, role core.Role) (core.User, string) {
	g.t.Helper()
	ctx := g.t.Context()
	team, err := g.svc.CreateTeam(ctx, "team-"+name)
	if err != nil {
		g.t.Fatal(err)
	}
	u, err := g.svc.CreateUser(ctx, name, team.ID, role)
	if err != nil {
		g.t.Fatal(err)
	}
	return u, g.token(u)
}

// token makes another token of u, through the service.
func (g *guarded) token(u core.User) string {
	g.t.Helper()
	_, secret, err := g.svc.CreateToken(g.t.Context(), core.Principal{User: core.User{Role: core.RoleAdmin}}, u.ID, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	return secret
}

// from sends a request to the handler as if from the TCP peer remote
// ("ip:port"), with a bearer token unless token is "", and extra headers
// as name, value pairs. It returns the status, the problem of a refusal
// and the Retry-After header.
func (g *guarded) from(remote, method, path, token string, body any, headers ...string) (int, problem, string) {
	g.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(b))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	g.handler.ServeHTTP(rec, req)
	var p problem
	if rec.Code >= 400 {
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
	}
	return rec.Code, p, rec.Header().Get("Retry-After")
}

// auditRecords is the whole audit log.
func (g *guarded) auditRecords() []core.AuditRecord {
	g.t.Helper()
	rs, err := g.svc.Audit(g.t.Context(), 0, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	return rs
}

type newToken struct {
	ID        string     `json:"id"`
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

// TestTokenCannotOutliveItsMaker: a request authenticated by a token that
// expires at T makes tokens that expire at T at the latest; one that asks
// for no expiry gets T, and an admin's short token binds it too.
func TestTokenCannotOutliveItsMaker(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	me := f.self[core.RoleMember]
	var hour newToken
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": "1h"}, &hour); code != 201 || hour.ExpiresAt == nil {
		t.Fatalf("making a 1h token: %d %+v", code, hour)
	}
	limit := *hour.ExpiresAt
	if !limit.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the 1h token expires at %s, want %s", limit, t0.Add(time.Hour))
	}

	// 1. Longer than the maker: refused, naming the limit.
	for _, longer := range []string{"720h", "1h1m", "87600h"} {
		var p problem
		code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": longer}, &p, hour.Token)
		if code != 400 || p.Code != "invalid_argument" || !strings.Contains(p.Detail, "outlive") || !strings.Contains(p.Detail, ts(limit)) {
			t.Errorf("a 1h token asking for %s: %d %s %q, want 400 invalid_argument naming %s", longer, code, p.Code, p.Detail, ts(limit))
		}
	}
	// 2. No expiry asked: the maker's.
	var child newToken
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{}, &child, hour.Token); code != 201 || child.ExpiresAt == nil || !child.ExpiresAt.Equal(limit) {
		t.Fatalf("a 1h token asking for no expiry: %d, expires %v, want %s", code, child.ExpiresAt, limit)
	}
	// 3. The child is bound the same way; shorter is fine.
	var p problem
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": "2h"}, &p, child.Token); code != 400 {
		t.Errorf("the child asking for 2h: %d %q, want 400", code, p.Detail)
	}
	var short newToken
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": "30m"}, &short, child.Token); code != 201 || short.ExpiresAt == nil || !short.ExpiresAt.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("the child asking for 30m: %d, expires %v", code, short.ExpiresAt)
	}
	// 4. An admin's short token binds what it makes for others too.
	admin := f.self[core.RoleAdmin]
	var adminHour newToken
	if code := call(t, e.url, "POST", "/v1/users/"+admin+"/tokens", map[string]any{"expiresIn": "1h"}, &adminHour); code != 201 {
		t.Fatalf("making an admin's 1h token: %d", code)
	}
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": "720h"}, &p, adminHour.Token); code != 400 {
		t.Errorf("an admin's 1h token making a 720h token for a member: %d, want 400", code)
	}
	// 5. A token that never expires still makes tokens that never expire.
	var forever newToken
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{}, &forever, f.token(core.RoleMember)); code != 201 || forever.ExpiresAt != nil {
		t.Errorf("a token without expiry asking for none: %d, expires %v, want never", code, forever.ExpiresAt)
	}
}

// TestTokensPerUserBounded: a user holds at most 20 live tokens; one more
// is a conflict until one is revoked or expires.
func TestTokensPerUserBounded(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	u := f.users[f.alpha] // holds no token yet
	made := make([]newToken, 20)
	for i := range made {
		if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{"expiresIn": "1h"}, &made[i]); code != 201 {
			t.Fatalf("making token %d: %d", i+1, code)
		}
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{}, &p); code != 409 || p.Code != "conflict" || !strings.Contains(p.Detail, "20 live tokens") {
		t.Fatalf("the 21st token: %d %s %q, want 409 conflict saying the bound", code, p.Code, p.Detail)
	}
	// The refused request left nothing behind.
	var list struct{ Tokens []struct{ ID, User string } }
	call(t, e.url, "GET", "/v1/tokens", nil, &list)
	n := 0
	for _, tk := range list.Tokens {
		if tk.User == u {
			n++
		}
	}
	if n != 20 {
		t.Fatalf("user holds %d tokens after the refusal, want 20", n)
	}
	// A revoked token leaves room.
	if code := call(t, e.url, "DELETE", "/v1/tokens/"+made[0].ID, nil, nil); code != 200 {
		t.Fatalf("revoking: %d", code)
	}
	if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{}, nil); code != 201 {
		t.Fatalf("a token after revoking one: %d, want 201", code)
	}
	if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{}, nil); code != 409 {
		t.Fatalf("the 21st token again: %d, want 409", code)
	}
	// Expired tokens leave room: 19 of the 20 live ones expire.
	e.advance(time.Hour)
	for i := range 19 {
		if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{}, nil); code != 201 {
			t.Fatalf("token %d after the others expired: %d, want 201", i+2, code)
		}
	}
	if code := call(t, e.url, "POST", "/v1/users/"+u+"/tokens", map[string]any{}, nil); code != 409 {
		t.Fatalf("the 21st live token: %d, want 409", code)
	}
}

// TestRateLimitPerUser: all of a user's tokens draw on one bucket; another
// user's is its own.
func TestRateLimitPerUser(t *testing.T) {
	g := startGuarded(t, api.Options{RateLimit: 0.001, RateBurst: 3}) // no refill within the test
	ada, first := g.user("ada", core.RoleMember)
	second := g.token(ada)
	_, bob := g.user("bob", core.RoleMember)
	for i, tok := range []string{first, second, first} {
		if code, p, _ := g.from("192.0.2.10:4000", "GET", "/v1/whoami", tok, nil); code != 200 {
			t.Fatalf("request %d of ada: %d %q", i+1, code, p.Detail)
		}
	}
	for _, tok := range []string{second, first, g.token(ada)} {
		code, p, retry := g.from("192.0.2.10:4000", "GET", "/v1/whoami", tok, nil)
		if code != 429 || p.Code != "rate_limited" || !strings.Contains(p.Detail, "user ada") || retry == "" {
			t.Fatalf("ada beyond her burst with another token: %d %s %q Retry-After %q, want 429 naming the user", code, p.Code, p.Detail, retry)
		}
	}
	if code, p, _ := g.from("192.0.2.10:4000", "GET", "/v1/whoami", bob, nil); code != 200 {
		t.Fatalf("bob, from the same address: %d %q", code, p.Detail)
	}
}

// TestUnauthenticatedLimitedPerAddress: requests without a valid token
// draw on a bucket of their client address, the TCP peer's (an IPv6 /64),
// whatever X-Forwarded-For says; another address still gets its 401, and
// a valid token from the flooding address is not held back.
func TestUnauthenticatedLimitedPerAddress(t *testing.T) {
	g := startGuarded(t, api.Options{RateLimit: 0.001, RateBurst: 3})
	_, valid := g.user("ada", core.RoleViewer)
	unknown := "cbt_" + strings.Repeat("A", 43)
	for i, tok := range []string{"", unknown, "not a token"} {
		if code, p, _ := g.from("10.0.0.1:5000", "GET", "/v1/blocks", tok, nil); code != 401 {
			t.Fatalf("bad request %d from 10.0.0.1: %d %q, want 401", i+1, code, p.Detail)
		}
	}
	tests := map[string]struct {
		remote, token string
		headers       []string
		want          int
	}{
		"the flood, no token":          {remote: "10.0.0.1:5000", want: 429},
		"the flood, an unknown token":  {remote: "10.0.0.1:5001", token: unknown, want: 429},
		"the flood, claiming a proxy":  {remote: "10.0.0.1:5002", headers: []string{"X-Forwarded-For", "10.0.0.9", "X-Real-Ip", "10.0.0.9"}, want: 429},
		"another address":              {remote: "10.0.0.2:5000", want: 401},
		"another address, forwarding":  {remote: "10.0.0.3:5000", headers: []string{"X-Forwarded-For", "10.0.0.1"}, want: 401},
		"a valid token from the flood": {remote: "10.0.0.1:5003", token: valid, want: 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, p, retry := g.from(tc.remote, "GET", "/v1/blocks", tc.token, nil, tc.headers...)
			if code != tc.want || (code == 429 && (p.Code != "rate_limited" || retry == "")) {
				t.Errorf("%d %s %q Retry-After %q, want %d", code, p.Code, p.Detail, retry, tc.want)
			}
		})
	}
	// One IPv6 /64 is one client.
	for i := range 3 {
		if code, _, _ := g.from("[2001:db8:1:2::1]:5000", "GET", "/v1/blocks", "", nil); code != 401 {
			t.Fatalf("bad request %d from 2001:db8:1:2::1: %d, want 401", i+1, code)
		}
	}
	if code, _, _ := g.from("[2001:db8:1:2:ffff::9]:5000", "GET", "/v1/blocks", "", nil); code != 429 {
		t.Errorf("another address of the same /64: %d, want 429", code)
	}
	if code, _, _ := g.from("[2001:db8:1:3::1]:5000", "GET", "/v1/blocks", "", nil); code != 401 {
		t.Errorf("an address of another /64: %d, want 401", code)
	}
}

// TestUnauthenticatedAuditBounded: requests without a valid token are not
// each written to the audit log: the first of each client address in a
// minute is, so the log shows them without growing with them.
func TestUnauthenticatedAuditBounded(t *testing.T) {
	g := startGuarded(t, api.Options{}) // no rate limit: every request gets its 401
	before := len(g.auditRecords())
	for i := range 100 {
		tok := ""
		if i%2 == 1 {
			tok = "cbt_" + strings.Repeat("B", 43)
		}
		if code, _, _ := g.from("10.0.0.1:5000", "POST", "/v1/teams", tok, map[string]any{"name": "x"}); code != 401 {
			t.Fatalf("bad request %d: %d, want 401", i+1, code)
		}
	}
	for range 10 {
		g.from("10.0.0.2:5000", "POST", "/v1/teams", "", map[string]any{"name": "x"})
	}
	rs := g.auditRecords()[before:]
	if len(rs) != 2 {
		t.Fatalf("110 unauthenticated requests from 2 addresses wrote %d audit records, want 2", len(rs))
	}
	for _, r := range rs {
		if r.Route != "/v1/teams" || r.Status != 401 || r.Outcome != "unauthenticated" || r.User != "" {
			t.Errorf("audit record %+v, want an unauthenticated POST /v1/teams by no one", r)
		}
	}
}

// TestEventCursorIgnoresOtherTeams: nothing of another team's activity
// shows in a member's feed, not even in its cursor, and a long poll does
// not end because another team acted.
func TestEventCursorIgnoresOtherTeams(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	member := f.token(core.RoleMember) // of alpha
	f.block(f.alpha)
	type page struct {
		Events []struct{ ID, Team string }
		Next   string
	}
	poll := func(query string) page {
		t.Helper()
		var p page
		if code := call(t, e.url, "GET", "/v1/events"+query, nil, &p, member); code != 200 {
			t.Fatalf("GET /v1/events%s: %d", query, code)
		}
		return p
	}
	first := poll("")
	if len(first.Events) == 0 || first.Next == "0" {
		t.Fatalf("alpha's feed after its purchase: %+v, want its events", first)
	}
	// beta buys and cancels.
	bActs := func() {
		id := f.block(f.beta)
		if code := call(t, e.url, "POST", "/v1/blocks/"+id+"/cancel", nil, nil); code != 200 {
			t.Fatalf("cancelling beta's block: %d", code)
		}
	}
	bActs()
	if got := poll("?after=" + first.Next); len(got.Events) != 0 || got.Next != first.Next {
		t.Fatalf("alpha's feed after beta acted: %+v, want no events and the cursor %s", got, first.Next)
	}
	if got := poll(""); got.Next != first.Next {
		t.Fatalf("alpha's feed from the start after beta acted: next %s, want %s", got.Next, first.Next)
	}
	var all page
	call(t, e.url, "GET", "/v1/events?after="+first.Next, nil, &all) // the admin's
	if len(all.Events) == 0 {
		t.Fatal("the admin sees no event of beta's: the test did not make any")
	}

	// A long poll waits its whole time while beta acts.
	done := make(chan page, 1)
	began := time.Now()
	go func() {
		var p page
		call(t, e.url, "GET", "/v1/events?after="+first.Next+"&wait=2s", nil, &p, member)
		done <- p
	}()
	bActs()
	bActs()
	got := <-done
	if waited := time.Since(began); waited < 2*time.Second {
		t.Errorf("the long poll returned after %s, before its 2s, while beta acted", waited)
	}
	if len(got.Events) != 0 || got.Next != first.Next {
		t.Errorf("the long poll: %+v, want no events and the cursor %s", got, first.Next)
	}
}

// TestWebhookToOwnAddressRefused: a webhook may not name one of the
// server's own addresses, loopback or not.
func TestWebhookToOwnAddressRefused(t *testing.T) {
	g := startGuarded(t, api.Options{})
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() { // link-local ones need a zone in a URL
			continue
		}
		own = append(own, ipn.IP.String())
	}
	if len(own) == 0 {
		t.Skip("this host has no non-loopback address")
	}
	for _, ip := range own {
		u := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, "8080"), Path: "/hook"}
		var p problem
		code := call(t, g.url, "POST", "/v1/webhooks", map[string]any{"url": u.String(), "events": []string{"*"}}, &p)
		if code != 400 || p.Code != "invalid_argument" || !strings.Contains(p.Detail, "--webhook-allow-private") {
			t.Errorf("a webhook to %s, an address of this host: %d %s %q, want 400 invalid_argument", u.String(), code, p.Code, p.Detail)
		}
	}
}
