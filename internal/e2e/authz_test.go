package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"capblock/internal/api"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// TestAuthorizationMatrix asks every operation of the router (read from
// the server's own OpenAPI document, so a new route cannot be forgotten)
// as each principal, on a resource of the caller's own team and of
// another team, and asserts the exact status of each cell, which it
// derives from contract's access table (the rule of the use case the
// operation calls):
//
//	no token, a disabled user's, a revoked one → 401 (public routes: success)
//	role below the use case's need             → 403
//	another team's resource, not admin         → 404 (403 to buy for another team)
//	otherwise                                  → the route's success status
//
// Each request also says the role it expects, written here apart from
// the table: the two must agree, so that a rule loosened by mistake fails.
func TestAuthorizationMatrix(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)

	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if code := call(t, e.url, "GET", "/openapi.json", nil, &doc); code != 200 {
		t.Fatalf("openapi: %d", code)
	}
	var ops []string
	for _, methods := range doc.Paths {
		for _, op := range methods {
			ops = append(ops, op.OperationID)
		}
	}
	sort.Strings(ops)
	if len(ops) < 25 {
		t.Fatalf("only %d operations in the OpenAPI document", len(ops))
	}
	roles := []core.Role{"", core.RoleViewer, core.RoleMember, core.RoleAdmin, roleDisabled, roleRevoked}
	cells := 0
	for _, op := range ops {
		mk, ok := authzRequests[op]
		if !ok {
			t.Errorf("operation %s has no request in the authorization matrix: add one", op)
			continue
		}
		need := tableRole(t, op)
		if written := mk(f, "", false).need; written != need {
			t.Errorf("operation %s: the access table requires role %q, the matrix says %q", op, need, written)
		}
		for _, role := range roles {
			for _, other := range []bool{false, true} {
				r := mk(f, role, other)
				want := r.success
				switch {
				case need == "":
				case role == "" || role == roleDisabled || role == roleRevoked:
					want = http.StatusUnauthorized
				case !role.Allows(need):
					want = http.StatusForbidden
				case other && r.scoped && role != core.RoleAdmin:
					want = r.otherStatus
				}
				var p map[string]any // a problem, or whatever the route answers
				got := call(t, e.url, r.method, r.path, r.body, &p, f.token(role))
				cells++
				if got != want {
					t.Errorf("%s as %q on %s team's resource: %s %s → %d %v (%v), want %d",
						op, role, map[bool]string{false: "its own", true: "another"}[other], r.method, r.path, got, p["code"], p["detail"], want)
				}
			}
		}
	}
	t.Logf("%d operations × %d principals × own/other team: %d cells", len(ops), len(roles), cells)
}

// roleDisabled and roleRevoked stand, in the matrix, for a member whose
// user is disabled and for a member's revoked token.
const (
	roleDisabled core.Role = "disabled user"
	roleRevoked  core.Role = "revoked token"
)

// tableRole is the role that contract's access table gives the use case
// an operation calls; "" for a public operation.
func tableRole(t *testing.T, op string) core.Role {
	t.Helper()
	uc, ok := api.UseCaseOf(op)
	if !ok {
		t.Fatalf("operation %s has no use case", op)
	}
	if uc == "" {
		return ""
	}
	rule, ok := contract.RuleOf(uc)
	if !ok {
		t.Fatalf("operation %s calls use case %s, which has no rule", op, uc)
	}
	return rule.Role
}

// authzRequest is one concrete request of an operation.
type authzRequest struct {
	// need is the role the route requires, written here independently of
	// the server's access table, which must agree.
	need         core.Role
	method, path string
	body         any
	success      int
	// scoped is set when the request names a team's resource: another
	// team's answers otherStatus (404: no existence leak) to a non-admin.
	scoped      bool
	otherStatus int
}

// authzFixture holds two teams with a member and a viewer each, and makes
// fresh resources on demand, so that mutating cells do not share them.
type authzFixture struct {
	e           *env
	alpha, beta string // team ids
	tokens      map[core.Role]string
	self        map[core.Role]string // role → the user id that role's token belongs to
	users       map[string]string    // team → a spare user id of that team
	n           atomic.Int64
}

func newAuthzFixture(e *env) *authzFixture {
	f := &authzFixture{e: e, tokens: map[core.Role]string{}, self: map[core.Role]string{}, users: map[string]string{}}
	adminTok, _ := tokens.Load(e.url)
	f.tokens[core.RoleAdmin] = adminTok.(string)
	f.self[core.RoleAdmin] = e.whoami().ID
	f.alpha = f.team("alpha")
	f.beta = f.team("beta")
	for _, role := range []core.Role{core.RoleMember, core.RoleViewer} {
		u := f.user(f.alpha, string(role)+"-a", role)
		f.tokens[role] = f.newToken(u)
		f.self[role] = u
	}
	disabled := f.user(f.alpha, "disabled-a", core.RoleMember)
	f.tokens[roleDisabled] = f.newToken(disabled)
	f.self[roleDisabled] = disabled
	if code := call(e.t, e.url, "POST", "/v1/users/"+disabled+"/disable", nil, nil); code != 200 {
		e.t.Fatalf("disabling a user: %d", code)
	}
	var revoked struct{ ID, Token string }
	f.self[roleRevoked] = f.user(f.alpha, "revoked-a", core.RoleMember)
	if code := call(e.t, e.url, "POST", "/v1/users/"+f.self[roleRevoked]+"/tokens", map[string]any{}, &revoked); code != 201 {
		e.t.Fatalf("creating a token: %d", code)
	}
	f.tokens[roleRevoked] = revoked.Token
	if code := call(e.t, e.url, "DELETE", "/v1/tokens/"+revoked.ID, nil, nil); code != 200 {
		e.t.Fatalf("revoking a token: %d", code)
	}
	f.users[f.alpha] = f.user(f.alpha, "spare-a", core.RoleViewer)
	f.users[f.beta] = f.user(f.beta, "spare-b", core.RoleViewer)
	f.self[""] = f.users[f.alpha]
	return f
}

func (f *authzFixture) token(role core.Role) string {
	if role == "" {
		return "-"
	}
	return f.tokens[role]
}

func (f *authzFixture) team(name string) string {
	var out struct{ ID string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/teams", map[string]any{"name": name}, &out); code != 201 {
		f.e.t.Fatalf("creating team %s: %d", name, code)
	}
	return out.ID
}

func (f *authzFixture) user(team, name string, role core.Role) string {
	var out struct{ ID string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/users", map[string]any{"name": name, "team": team, "role": role}, &out); code != 201 {
		f.e.t.Fatalf("creating user %s: %d", name, code)
	}
	return out.ID
}

func (f *authzFixture) newToken(user string) string {
	var out struct{ Token string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/users/"+user+"/tokens", map[string]any{}, &out); code != 201 {
		f.e.t.Fatalf("creating a token: %d", code)
	}
	return out.Token
}

// accessKeyID makes an access key of a user, as the admin, and returns
// its id.
func (f *authzFixture) accessKeyID(user string) string {
	var out struct{ ID string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/users/"+user+"/access-keys", nil, &out); code != 201 {
		f.e.t.Fatalf("creating an access key: %d", code)
	}
	return out.ID
}

// tokenID makes a token of a user, as the admin, and returns its id.
func (f *authzFixture) tokenID(user string) string {
	var out struct{ ID string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/users/"+user+"/tokens", map[string]any{}, &out); code != 201 {
		f.e.t.Fatalf("creating a token: %d", code)
	}
	return out.ID
}

// teamOf is the resource team of a cell.
func (f *authzFixture) teamOf(other bool) string {
	if other {
		return f.beta
	}
	return f.alpha
}

// freshUser makes a viewer in a team, as the admin, for a request that
// changes it (disabling) without touching the users the matrix acts as.
func (f *authzFixture) freshUser(team string) string {
	var u user
	body := map[string]any{"name": fmt.Sprintf("fresh%d", f.n.Add(1)), "team": team, "role": "viewer"}
	if code := call(f.e.t, f.e.url, "POST", "/v1/users", body, &u); code != 201 {
		f.e.t.Fatalf("creating a user in %s: %d", team, code)
	}
	return u.ID
}

// freshTeam makes a team, as the admin, for a request that disables it.
func (f *authzFixture) freshTeam() string {
	var t struct{ ID string }
	if code := call(f.e.t, f.e.url, "POST", "/v1/teams", map[string]any{"name": fmt.Sprintf("fresh%d", f.n.Add(1))}, &t); code != 201 {
		f.e.t.Fatalf("creating a team: %d", code)
	}
	return t.ID
}

// offering quotes one l4.1x for an hour, each call at another hour so the
// pool never runs dry.
func (f *authzFixture) offering() string {
	s := t0.Add(time.Duration(2+f.n.Add(1)%1000) * time.Hour)
	return f.e.exact(searchQuery("l4.1x", 1, 1, s, s.Add(time.Hour)), 1, s).OfferingID
}

// block buys a fresh block for a team, as the admin.
func (f *authzFixture) block(team string) string {
	var b block
	body := map[string]any{"offeringId": f.offering(), "clientToken": fmt.Sprintf("authz-%d", f.n.Add(1)), "team": team}
	if code := call(f.e.t, f.e.url, "POST", "/v1/blocks", body, &b); code != 201 {
		f.e.t.Fatalf("buying a block for %s: %d", team, code)
	}
	return b.ID
}

// job makes a job on a fresh block of a team, as the admin.
func (f *authzFixture) job(team string) string {
	var out struct{ ID string }
	body := map[string]any{"blockId": f.block(team), "command": []string{"true"}}
	if code := call(f.e.t, f.e.url, "POST", "/v1/jobs", body, &out); code != 201 {
		f.e.t.Fatalf("creating a job for %s: %d", team, code)
	}
	return out.ID
}

func (f *authzFixture) extensionOffering(id string) string {
	var out struct{ Offerings []offering }
	if code := call(f.e.t, f.e.url, "GET", "/v1/blocks/"+id+"/extension-offerings?durationHours=1", nil, &out); code != 200 || len(out.Offerings) == 0 {
		f.e.t.Fatalf("extension offerings of %s: %d", id, code)
	}
	return out.Offerings[0].OfferingID
}

// seriesSearch asks for one l4.1x on one day, an hour long, each call
// at another day and hour so the pool never runs dry; the days are past
// the hours that offering quotes (up to 1001 hours ahead).
func (f *authzFixture) seriesSearch() map[string]any {
	n := f.n.Add(1)
	day := t0.AddDate(0, 0, 43+int(n%12)).Format(time.DateOnly)
	h := 1 + n%20
	return map[string]any{"instanceType": "l4.1x", "instanceCount": 1, "daysOfWeek": []string{"weekdays", "weekend"},
		"startTime": fmt.Sprintf("%02d:00", h), "endTime": fmt.Sprintf("%02d:00", h+1), "timeZone": "UTC",
		"fromDate": day, "toDate": day}
}

func (f *authzFixture) seriesOffering() string {
	var out struct {
		SeriesOfferings []struct{ OfferingID string } `json:"seriesOfferings"`
	}
	if code := call(f.e.t, f.e.url, "POST", "/v1/series-offerings", f.seriesSearch(), &out); code != 200 ||
		len(out.SeriesOfferings) == 0 || out.SeriesOfferings[0].OfferingID == "" {
		f.e.t.Fatalf("series offerings: %d %+v", code, out)
	}
	return out.SeriesOfferings[0].OfferingID
}

// series buys a fresh series for a team, as the admin.
func (f *authzFixture) series(team string) string {
	var out struct{ ID string }
	body := map[string]any{"offeringId": f.seriesOffering(), "clientToken": fmt.Sprintf("authz-series-%d", f.n.Add(1)), "team": team}
	if code := call(f.e.t, f.e.url, "POST", "/v1/series", body, &out); code != 201 {
		f.e.t.Fatalf("buying a series for %s: %d", team, code)
	}
	return out.ID
}

// orderBody is a notify order; nothing serves it in this test, so it
// stays open.
func (f *authzFixture) orderBody() map[string]any {
	return map[string]any{"instanceType": "l4.1x", "instanceCount": 1, "durationHours": 1,
		"startAfter": ts(t0.Add(48 * time.Hour)), "endBefore": ts(t0.Add(72 * time.Hour))}
}

// order places a fresh order for a team, as the admin.
func (f *authzFixture) order(team string) string {
	var out struct{ ID string }
	body := f.orderBody()
	body["team"] = team
	if code := call(f.e.t, f.e.url, "POST", "/v1/orders", body, &out); code != 201 {
		f.e.t.Fatalf("placing an order for %s: %d", team, code)
	}
	return out.ID
}

var authzRequests = map[string]func(f *authzFixture, role core.Role, other bool) authzRequest{
	"healthz": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: "", method: "GET", path: "/healthz", success: 200}
	},
	"readyz": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: "", method: "GET", path: "/readyz", success: 200}
	},
	"listInstanceTypes": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/instance-types", success: 200}
	},
	"listNodes": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/nodes", success: 200}
	},
	"getAvailability": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/availability?instanceType=h100.8x&from=" + ts(t0) + "&to=" + ts(t0.Add(24*time.Hour)), success: 200}
	},
	"searchOfferings": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/offerings?" + searchQuery("l4.1x", 1, 1, t0.Add(time.Hour), t0.Add(48*time.Hour)), success: 200}
	},
	"getPriceCalendar": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/offerings/price-calendar?instanceType=l4.1x&instanceCount=1&durationHours=1&startAfter=" + ts(t0.Add(time.Hour)) + "&endBefore=" + ts(t0.Add(48*time.Hour)), success: 200}
	},
	"getFleetCalendar": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/fleet-calendar?hours=24", success: 200}
	},
	"getCancelQuote": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/cancel-quote", success: 200, scoped: true, otherStatus: 404}
	},
	"purchaseBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		body := map[string]any{"offeringId": f.offering(), "clientToken": fmt.Sprintf("buy-%d", f.n.Add(1)), "team": f.teamOf(other)}
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks", body: body, success: 201, scoped: true, otherStatus: 403}
	},
	"listBlocks": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/blocks", success: 200}
	},
	"getBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/blocks/" + f.block(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"getBlockStatus": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/status", success: 200, scoped: true, otherStatus: 404}
	},
	"setBlockLending": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/lending", body: map[string]any{"enabled": true},
			success: 200, scoped: true, otherStatus: 404}
	},
	"cancelBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/cancel", success: 200, scoped: true, otherStatus: 404}
	},
	// Under the default transfer policy (limits.transfers: admin) a
	// member's transfer of its own team's block is forbidden.
	"transferBlock": func(f *authzFixture, role core.Role, other bool) authzRequest {
		success := http.StatusOK
		if role != core.RoleAdmin {
			success = http.StatusForbidden
		}
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/transfer",
			body: map[string]any{"team": f.teamOf(!other)}, success: success, scoped: true, otherStatus: 404}
	},
	"releaseBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/release", success: 200, scoped: true, otherStatus: 404}
	},
	"getUtilisation": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/utilisation?team=" + f.teamOf(other), success: 200, scoped: true, otherStatus: 404}
	},
	"listExtensionOfferings": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/extension-offerings?durationHours=1", success: 200, scoped: true, otherStatus: 404}
	},
	// With the default policy no block waits for approval: an admin's
	// approval of a scheduled block is an invalid state.
	"approveBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/blocks/" + f.block(f.teamOf(other)) + "/approve", success: 409}
	},
	"extendBlock": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		id := f.block(f.teamOf(other))
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/blocks/" + id + "/extensions", body: map[string]any{"offeringId": f.extensionOffering(id)},
			success: 200, scoped: true, otherStatus: 404}
	},
	"searchPlanOfferings": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/plan-offerings?" + searchQuery("l4.1x", 1, 1, t0.Add(time.Hour), t0.Add(48*time.Hour)), success: 200}
	},
	"purchasePlan": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		body := map[string]any{"offeringId": f.planOffering(), "clientToken": fmt.Sprintf("plan-%d", f.n.Add(1)), "team": f.teamOf(other)}
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/plans", body: body, success: 201, scoped: true, otherStatus: 403}
	},
	"listPlans": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/plans", success: 200}
	},
	"getPlan": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/plans/" + f.plan(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"getPolicy": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/policy", success: 200}
	},
	"cancelPlan": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/plans/" + f.plan(f.teamOf(other)) + "/cancel", success: 200, scoped: true, otherStatus: 404}
	},
	"searchSeriesOfferings": func(f *authzFixture, _ core.Role, _ bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "POST", path: "/v1/series-offerings", body: f.seriesSearch(), success: 200}
	},
	"purchaseSeries": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		body := map[string]any{"offeringId": f.seriesOffering(), "clientToken": fmt.Sprintf("series-%d", f.n.Add(1)), "team": f.teamOf(other)}
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/series", body: body, success: 201, scoped: true, otherStatus: 403}
	},
	"listSeries": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/series", success: 200}
	},
	"getSeries": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/series/" + f.series(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"cancelSeries": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/series/" + f.series(f.teamOf(other)) + "/cancel", success: 200, scoped: true, otherStatus: 404}
	},
	"createOrder": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		body := f.orderBody()
		body["team"] = f.teamOf(other)
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/orders", body: body, success: 201, scoped: true, otherStatus: 403}
	},
	"listOrders": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/orders", success: 200}
	},
	"getOrder": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/orders/" + f.order(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"cancelOrder": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/orders/" + f.order(f.teamOf(other)) + "/cancel", success: 200, scoped: true, otherStatus: 404}
	},
	"listEvents": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/events", success: 200}
	},
	"createWebhook": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		body := map[string]any{"url": "https://example.com/hook", "events": []string{"block.*"}, "team": f.teamOf(other)}
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/webhooks", body: body, success: 201, scoped: true, otherStatus: 403}
	},
	"listWebhooks": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/webhooks", success: 200}
	},
	"deleteWebhook": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "DELETE", path: "/v1/webhooks/" + f.webhook(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"listWebhookDeliveries": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/webhooks/" + f.webhook(f.teamOf(other)) + "/deliveries", success: 200, scoped: true, otherStatus: 404}
	},
	"getClock": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/admin/clock", success: 200}
	},
	"setClock": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/admin/clock", body: map[string]any{"advance": "0s"}, success: 200}
	},
	"createJob": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/jobs", body: map[string]any{"blockId": f.block(f.teamOf(other)), "command": []string{"true"}},
			success: 201, scoped: true, otherStatus: 404}
	},
	"listJobs": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/jobs", success: 200}
	},
	"getJob": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/jobs/" + f.job(f.teamOf(other)), success: 200, scoped: true, otherStatus: 404}
	},
	"getJobLogs": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/jobs/" + f.job(f.teamOf(other)) + "/logs", success: 200, scoped: true, otherStatus: 404}
	},
	"stopJob": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleMember, method: "POST", path: "/v1/jobs/" + f.job(f.teamOf(other)) + "/stop", success: 200, scoped: true, otherStatus: 404}
	},
	"failNode": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/admin/nodes/h100-01/fail", success: 200}
	},
	"recoverNode": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/admin/nodes/h100-01/recover", success: 200}
	},
	"createTeam": func(f *authzFixture, _ core.Role, _ bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/teams", body: map[string]any{"name": fmt.Sprintf("t%d", f.n.Add(1))}, success: 201}
	},
	"listTeams": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/teams", success: 200}
	},
	"getTeam": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/teams/" + f.teamOf(other), success: 200, scoped: true, otherStatus: 404}
	},
	"putQuotas": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "PUT", path: "/v1/teams/" + f.teamOf(other) + "/quotas", body: map[string]any{
			"maxInstancesPerBlock": 64, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0}, success: 200}
	},
	"getQuotas": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/teams/" + f.teamOf(other) + "/quotas", success: 200, scoped: true, otherStatus: 404}
	},
	"putBudget": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "PUT", path: "/v1/teams/" + f.teamOf(other) + "/budget", body: map[string]any{
			"amount": map[string]any{"amount": "1000000.00", "currency": "USD"}, "period": "month"}, success: 200}
	},
	"getLedger": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/teams/" + f.teamOf(other) + "/ledger", success: 200, scoped: true, otherStatus: 404}
	},
	"getSpend": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/spend?team=" + f.teamOf(other), success: 200, scoped: true, otherStatus: 404}
	},
	"disableUser": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/users/" + f.freshUser(f.teamOf(other)) + "/disable", success: 200}
	},
	"enableUser": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/users/" + f.freshUser(f.teamOf(other)) + "/enable", success: 200}
	},
	"disableTeam": func(f *authzFixture, _ core.Role, _ bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/teams/" + f.freshTeam() + "/disable", success: 200}
	},
	"enableTeam": func(f *authzFixture, _ core.Role, _ bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/teams/" + f.freshTeam() + "/enable", success: 200}
	},
	"createUser": func(f *authzFixture, _ core.Role, other bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "POST", path: "/v1/users", body: map[string]any{
			"name": fmt.Sprintf("u%d", f.n.Add(1)), "team": f.teamOf(other), "role": "viewer"}, success: 201}
	},
	"listUsers": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/users", success: 200}
	},
	// A non-admin may make and revoke tokens of its own only: another
	// team's user (or a teammate, see TestTokensAreOwnersOnly) is not found.
	"createToken": func(f *authzFixture, role core.Role, other bool) authzRequest {
		u := f.self[role]
		if other {
			u = f.users[f.beta]
		}
		return authzRequest{need: core.RoleViewer, method: "POST", path: "/v1/users/" + u + "/tokens", body: map[string]any{},
			success: 201, scoped: true, otherStatus: 404}
	},
	"whoami": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/whoami", success: 200}
	},
	"listTokens": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/tokens", success: 200}
	},
	"revokeToken": func(f *authzFixture, role core.Role, other bool) authzRequest {
		u := f.self[role]
		if other {
			u = f.users[f.beta]
		}
		return authzRequest{need: core.RoleViewer, method: "DELETE", path: "/v1/tokens/" + f.tokenID(u), success: 200, scoped: true, otherStatus: 404}
	},
	// Access keys follow the rules of tokens.
	"createAccessKey": func(f *authzFixture, role core.Role, other bool) authzRequest {
		u := f.self[role]
		if other {
			u = f.users[f.beta]
		}
		return authzRequest{need: core.RoleViewer, method: "POST", path: "/v1/users/" + u + "/access-keys",
			success: 201, scoped: true, otherStatus: 404}
	},
	"listAccessKeys": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleViewer, method: "GET", path: "/v1/access-keys", success: 200}
	},
	"revokeAccessKey": func(f *authzFixture, role core.Role, other bool) authzRequest {
		u := f.self[role]
		if other {
			u = f.users[f.beta]
		}
		return authzRequest{need: core.RoleViewer, method: "DELETE", path: "/v1/access-keys/" + f.accessKeyID(u), success: 200, scoped: true, otherStatus: 404}
	},
	"listAudit": func(*authzFixture, core.Role, bool) authzRequest {
		return authzRequest{need: core.RoleAdmin, method: "GET", path: "/v1/audit", success: 200}
	},
}

// TestTokensAreOwnersOnly: a member or a viewer may make and revoke its
// own tokens, not a teammate's (the matrix covers another team's).
func TestTokensAreOwnersOnly(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	for _, role := range []core.Role{core.RoleMember, core.RoleViewer} {
		var p problem
		if code := call(t, e.url, "POST", "/v1/users/"+f.users[f.alpha]+"/tokens", map[string]any{}, &p, f.token(role)); code != 404 {
			t.Errorf("%s making a token for a teammate: %d %s, want 404", role, code, p.Code)
		}
		if code := call(t, e.url, "DELETE", "/v1/tokens/"+f.tokenID(f.users[f.alpha]), nil, &p, f.token(role)); code != 404 {
			t.Errorf("%s revoking a teammate's token: %d %s, want 404", role, code, p.Code)
		}
		var tok struct{ ID, Token string }
		if code := call(t, e.url, "POST", "/v1/users/"+f.self[role]+"/tokens", map[string]any{"expiresIn": "1h"}, &tok, f.token(role)); code != 201 {
			t.Fatalf("%s making its own token: %d", role, code)
		}
		if code := call(t, e.url, "DELETE", "/v1/tokens/"+tok.ID, nil, &p, f.token(role)); code != 200 {
			t.Errorf("%s revoking its own token: %d %s", role, code, p.Code)
		}
	}
}

// TestConsoleRoutes: the console's routes (its files, and the pages a
// browser loads by path) are public and hold no data: each principal,
// none included, gets the same bytes, with no team's id in them.
// Its data comes from /v1, whose operations the matrix above covers.
func TestConsoleRoutes(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	roles := []core.Role{"", core.RoleViewer, core.RoleMember, core.RoleAdmin, roleDisabled, roleRevoked}
	for _, path := range []string{"/", "/index.html", "/app.js", "/api.js", "/dom.js", "/heatmap.js", "/style.css",
		"/pages/blocks.js", "/pages/calendar.js", "/pages/find.js", "/blocks", "/calendar"} {
		var first []byte
		for _, role := range roles {
			req, err := http.NewRequest("GET", e.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "text/html,*/*")
			if tok := f.token(role); tok != "-" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s as %q: %d", path, role, resp.StatusCode)
				continue
			}
			if first == nil {
				first = body
			} else if !bytes.Equal(body, first) {
				t.Errorf("GET %s as %q answered other bytes than with no token", path, role)
			}
			for _, secret := range []string{f.alpha, f.beta} {
				if bytes.Contains(body, []byte(secret)) {
					t.Errorf("GET %s as %q holds %q", path, role, secret)
				}
			}
		}
	}
}
