package e2e

import (
	"fmt"
	"testing"
	"time"
)

// accountsBound is how soon a change of a token or a quota made through
// one replica must hold on the others: within the watch's delay, normally
// milliseconds (README), here with room for a loaded CI machine, yet well
// under the 10 s that the cache would keep it without the watch.
const accountsBound = 5 * time.Second

// TestReplicasForgetAccounts revokes a token and tightens a quota through
// one replica while another has them cached: the change holds at once on
// the first and within accountsBound on the second.
func TestReplicasForgetAccounts(t *testing.T) {
	_, rs := startReplicas(t, 2)
	a, b := rs[0].url, rs[1].url
	var team, user, tok struct{ ID, Token string }
	if code := call(t, a, "POST", "/v1/teams", map[string]any{"name": "gamma"}, &team); code != 201 {
		t.Fatalf("creating a team: %d", code)
	}
	if code := call(t, a, "POST", "/v1/users", map[string]any{"name": "gina", "team": team.ID, "role": "member"}, &user); code != 201 {
		t.Fatalf("creating a user: %d", code)
	}
	if code := call(t, a, "POST", "/v1/users/"+user.ID+"/tokens", map[string]any{}, &tok); code != 201 {
		t.Fatalf("creating a token: %d", code)
	}

	// b caches the token and the team's quota by buying with it. (Until
	// the quota holds, each try buys again.)
	s := t0.Add(3 * time.Hour)
	buy := func(base string, count int) (int, problem) {
		var out struct {
			Offerings []offering
			problem
		}
		// The search answers for the team's quota as the purchase does.
		code := call(t, base, "GET", "/v1/offerings?"+searchQuery("l4.1x", count, 2, s, s.Add(14*24*time.Hour)), nil, &out, tok.Token)
		if code != 200 {
			return code, out.problem
		}
		if len(out.Offerings) == 0 {
			return 0, problem{Detail: "no offering left"}
		}
		var p problem
		code = call(t, base, "POST", "/v1/blocks", map[string]any{"offeringId": out.Offerings[0].OfferingID,
			"clientToken": fmt.Sprintf("acc-%d", time.Now().UnixNano())}, &p, tok.Token)
		return code, p
	}
	if code, p := buy(b, 2); code != 201 {
		t.Fatalf("buying 2 through b: %d %s", code, p.Detail)
	}

	// The quota: at most 1 instance per block, set through a.
	if code := call(t, a, "PUT", "/v1/teams/"+team.ID+"/quotas", map[string]any{"maxInstancesPerBlock": 1, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0}, nil); code != 200 {
		t.Fatalf("setting the quota: %d", code)
	}
	waitFor(t, "the quota to hold on b's search", func() (bool, string) {
		code, p := buy(b, 2)
		return code == 403 && p.Code == "quota_exceeded", fmt.Sprintf("%d %s %s", code, p.Code, p.Detail)
	})

	// The token, revoked through a.
	var list struct {
		Tokens []struct{ ID string } `json:"tokens"`
	}
	call(t, a, "GET", "/v1/tokens", nil, &list, tok.Token)
	if len(list.Tokens) != 1 {
		t.Fatalf("the user's tokens: %+v", list.Tokens)
	}
	if code := call(t, a, "DELETE", "/v1/tokens/"+list.Tokens[0].ID, nil, nil); code != 200 {
		t.Fatalf("revoking the token: %d", code)
	}
	if code := call(t, a, "GET", "/v1/blocks", nil, nil, tok.Token); code != 401 {
		t.Fatalf("the revoked token on the replica that revoked it: %d, want 401 at once", code)
	}
	waitFor(t, "the revocation to hold on b", func() (bool, string) {
		code := call(t, b, "GET", "/v1/blocks", nil, nil, tok.Token)
		return code == 401, fmt.Sprint(code)
	})
}

// waitFor polls cond until it holds, failing the test after accountsBound
// with what cond saw last.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	for {
		ok, saw := cond()
		if ok {
			break
		}
		if time.Since(start) > accountsBound {
			t.Fatalf("waited %s for %s; last saw %s", accountsBound, what, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond))
}
