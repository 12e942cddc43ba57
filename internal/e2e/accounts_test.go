package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"capblock/internal/auth"
	"capblock/internal/core"
)

// TestBudgetRace fires 48 concurrent purchases for a team whose budget
// fits only some of them, each buyer with a quote of its own, searched
// before the race. Afterwards the ledger sums to exactly the fees
// of the stored blocks and never exceeds the budget, and every refused
// purchase said budget_exceeded and stored nothing.
func TestBudgetRace(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	s := t0.Add(2 * time.Hour)
	const buyers = 48
	quotes := e.quotes(buyers, searchQuery("l4.1x", 1, 10, s, s.Add(10*time.Hour)), 10, s)
	fee := quotes[0].UpfrontFee.Amount // one l4.1x for 10 hours
	budget := "40.00"                  // 5 of the 8 l4.1x the fleet has
	if code := call(t, e.url, "PUT", "/v1/teams/"+f.alpha+"/budget", map[string]any{
		"amount": map[string]any{"amount": budget, "currency": "USD"}, "period": "month"}, nil); code != 200 {
		t.Fatalf("setting the budget: %d", code)
	}
	member := f.token(core.RoleMember)
	codes := make([]string, buyers)
	var wg sync.WaitGroup
	race := make(chan struct{})
	for i, o := range quotes {
		wg.Go(func() {
			<-race
			var p problem
			code := call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": fmt.Sprintf("b-%d", i)}, &p, member)
			codes[i] = fmt.Sprint(code, p.Code)
		})
	}
	close(race)
	wg.Wait()
	ok, refused := 0, 0
	for _, c := range codes {
		switch c {
		case "201":
			ok++
		case "402budget_exceeded":
			refused++
		default:
			t.Errorf("unexpected answer %s", c)
		}
	}
	ledger, err := e.store.Ledger(context.Background(), f.alpha)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, le := range ledger {
		sum += le.Amount.Minor
	}
	blocks, err := e.svc.ListBlocks(context.Background(), f.alpha, "")
	if err != nil {
		t.Fatal(err)
	}
	var fees int64
	for _, b := range blocks {
		fees += b.Fee.Minor
	}
	t.Logf("fee %s, budget %s: %d bought, %d refused; ledger %d, stored fees %d", fee, budget, ok, refused, sum, fees)
	if ok == 0 || refused == 0 || ok+refused != buyers {
		t.Fatalf("%d bought and %d refused of %d: the budget should fit some, not all", ok, refused, buyers)
	}
	if len(blocks) != ok || len(ledger) != ok || sum != fees {
		t.Fatalf("%d blocks and %d ledger entries for %d purchases; ledger sums to %d, the blocks' fees to %d", len(blocks), len(ledger), ok, sum, fees)
	}
	if sum > 4000 {
		t.Fatalf("the ledger sums to %d cents, above the budget of 4000", sum)
	}
	var feeCents int64
	fmt.Sscanf(strings.Replace(fee, ".", "", 1), "%d", &feeCents)
	if sum+feeCents <= 4000 {
		t.Fatalf("another purchase of %d would still fit (spent %d of 4000): refused wrongly", feeCents, sum)
	}
}

// TestQuota: a purchase above the team's per-block or held limit is
// quota_exceeded, saying the limit and the current use.
func TestQuota(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	if code := call(t, e.url, "PUT", "/v1/teams/"+f.alpha+"/quotas", map[string]any{
		"maxInstancesPerBlock": 2, "maxInstancesHeld": 3, "maxDurationHours": 0, "maxLeadDays": 0}, nil); code != 200 {
		t.Fatalf("setting the quota: %d", code)
	}
	s := t0.Add(2 * time.Hour)
	buy := func(count int, token string) (int, problem) {
		o := e.exact(searchQuery("l4.1x", count, 4, s, s.Add(4*time.Hour)), 4, s)
		var p problem
		code := call(t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": o.OfferingID, "clientToken": fmt.Sprintf("q-%d-%d", count, time.Now().UnixNano())}, &p, token)
		return code, p
	}
	member := f.token(core.RoleMember)
	if code, p := buy(3, member); code != 403 || p.Code != "quota_exceeded" || !strings.Contains(p.Detail, "limit of 2") {
		t.Fatalf("3 in one block: %d %s %q", code, p.Code, p.Detail)
	}
	if code, _ := buy(2, member); code != 201 {
		t.Fatalf("2 in one block: %d", code)
	}
	if code, p := buy(2, member); code != 403 || p.Code != "quota_exceeded" || !strings.Contains(p.Detail, "2 already") || !strings.Contains(p.Detail, "limit of 3") {
		t.Fatalf("4 held at once: %d %s %q", code, p.Code, p.Detail)
	}
	if code, _ := buy(1, member); code != 201 {
		t.Fatal("3 held at once should fit")
	}
}

// TestTokens: a revoked or expired token is refused at once, and the
// database holds only the token's hash.
func TestTokens(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	me := f.self[core.RoleMember]
	var tok struct {
		ID, Token string
	}
	if code := call(t, e.url, "POST", "/v1/users/"+me+"/tokens", map[string]any{"expiresIn": "2h"}, &tok, f.token(core.RoleMember)); code != 201 {
		t.Fatalf("creating a token: %d", code)
	}
	if code := call(t, e.url, "GET", "/v1/blocks", nil, nil, tok.Token); code != 200 {
		t.Fatalf("a fresh token: %d", code)
	}
	// The stored form is not the token: its SHA-256 only.
	var hash string
	if err := openRead(t, e.db).QueryRow(`SELECT hash FROM tokens WHERE id = ?`, tok.ID).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if hash == tok.Token || strings.Contains(hash, tok.Token[4:]) || hash != auth.Hash(tok.Token) {
		t.Fatalf("stored %q for token %s: want its SHA-256, not the token", hash, tok.ID)
	}
	// Expired.
	e.advance(2 * time.Hour)
	var p problem
	if code := call(t, e.url, "GET", "/v1/blocks", nil, &p, tok.Token); code != 401 || !strings.Contains(p.Detail, "expired") {
		t.Fatalf("an expired token: %d %q", code, p.Detail)
	}
	// Revoked: refused on the very next request.
	other := f.newToken(me)
	if code := call(t, e.url, "GET", "/v1/blocks", nil, nil, other); code != 200 {
		t.Fatalf("a fresh token: %d", code)
	}
	var list struct {
		Tokens []struct{ ID string } `json:"tokens"`
	}
	call(t, e.url, "GET", "/v1/tokens", nil, &list, other)
	for _, tk := range list.Tokens {
		if code := call(t, e.url, "DELETE", "/v1/tokens/"+tk.ID, nil, nil, f.token(core.RoleAdmin)); code != 200 {
			t.Fatalf("revoking %s: %d", tk.ID, code)
		}
	}
	if code := call(t, e.url, "GET", "/v1/blocks", nil, &p, other); code != 401 || !strings.Contains(p.Detail, "revoked") {
		t.Fatalf("a revoked token: %d %q", code, p.Detail)
	}
	// A made-up token of the right form.
	if code := call(t, e.url, "GET", "/v1/blocks", nil, &p, "cbt_"+strings.Repeat("A", 43)); code != 401 {
		t.Fatalf("an unknown token: %d", code)
	}
}

// TestAudit: mutating requests are recorded with who, token, route and
// outcome; reads are not; only admins may read the log.
func TestAudit(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	var p problem
	call(t, e.url, "POST", "/v1/teams", map[string]any{"name": "gamma"}, &p, f.token(core.RoleMember)) // forbidden
	call(t, e.url, "GET", "/v1/blocks", nil, nil, f.token(core.RoleMember))
	call(t, e.url, "POST", "/v1/teams", map[string]any{"name": "delta"}, nil, "-") // no token
	var log struct {
		Records []struct {
			User, TokenID, Method, Route, Outcome string
			Status                                int
		} `json:"records"`
	}
	if code := call(t, e.url, "GET", "/v1/audit", nil, &log); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	var forbidden, reads, anonymous int
	for _, r := range log.Records {
		if r.Method == "GET" {
			reads++
		}
		if r.Route == "/v1/teams" && r.Status == 401 && r.User == "" && r.Outcome == "unauthenticated" {
			anonymous++
		}
		if r.Route == "/v1/teams" && r.Status == 403 && r.Outcome == "forbidden" && r.User == f.self[core.RoleMember] && r.TokenID != "" {
			forbidden++
		}
	}
	if forbidden != 1 || anonymous != 1 || reads != 0 {
		t.Fatalf("%d forbidden and %d unauthenticated team creations and %d reads recorded, want 1, 1 and 0: %+v", forbidden, anonymous, reads, log.Records)
	}
	if code := call(t, e.url, "GET", "/v1/audit", nil, &p, f.token(core.RoleMember)); code != 403 {
		t.Fatalf("a member reading the audit log: %d", code)
	}

	// A purchase is recorded once, in the transaction that stores the
	// block, naming the block; its replay (same client token) once more.
	s := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("l4.1x", 1, 2, s, s.Add(2*time.Hour)), 2, s)
	b, code := e.buy(o.OfferingID, "audited-1")
	if code != 201 {
		t.Fatalf("buying: %d", code)
	}
	if _, code := e.buy(o.OfferingID, "audited-1"); code != 200 {
		t.Fatalf("replaying the purchase: %d", code)
	}
	var after struct {
		Records []struct {
			Route, Subject, Outcome string
			Status                  int
		} `json:"records"`
	}
	call(t, e.url, "GET", "/v1/audit", nil, &after)
	var got []string
	for _, r := range after.Records {
		if r.Route == "/v1/blocks" {
			got = append(got, fmt.Sprintf("%d %s %s", r.Status, r.Outcome, r.Subject))
		}
	}
	if want := []string{"201 ok " + b.ID, "200 ok "}; !slices.Equal(got, want) {
		t.Fatalf("audit records of the purchase and its replay: %q, want %q", got, want)
	}
}
