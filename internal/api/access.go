package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/auth"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/httpx"
)

// public marks an operation that needs no token.
const public contract.UseCase = ""

// useCases is the use case of contract.Service that each operation calls,
// whose rule in contract's access table decides who may: the service
// checks it on every call, and the guard asks it before reading a
// request, so that a caller refused for its role hears that first. Every
// registered operation must be listed: New panics on one that is not, so
// a new route cannot be forgotten, and the authorization matrix and the
// README's access table are made from this and contract's table.
var useCases = map[string]contract.UseCase{
	"healthz":                public,
	"readyz":                 public,
	"listInstanceTypes":      "Fleet",
	"listNodes":              "Nodes",
	"getAvailability":        "Availability",
	"getPolicy":              "Fleet",
	"getFleetCalendar":       "FleetCalendar",
	"searchOfferings":        "Offerings",
	"purchaseBlock":          "Purchase",
	"listBlocks":             "ListBlocks",
	"getBlock":               "GetBlock",
	"cancelBlock":            "CancelBlock",
	"approveBlock":           "ApproveBlock",
	"listExtensionOfferings": "ExtensionOfferings",
	"extendBlock":            "Extend",
	"getBlockStatus":         "BlockStatus",
	"getPriceCalendar":       "PriceCalendar",
	"getCancelQuote":         "CancelQuote",
	"transferBlock":          "TransferBlock",
	"releaseBlock":           "ReleaseBlock",
	"setBlockLending":        "SetLending",
	"searchPlanOfferings":    "PlanOfferings",
	"purchasePlan":           "PurchasePlan",
	"listPlans":              "ListPlans",
	"getPlan":                "GetPlan",
	"cancelPlan":             "CancelPlan",
	"searchSeriesOfferings":  "SeriesOfferings",
	"purchaseSeries":         "PurchaseSeries",
	"listSeries":             "ListSeries",
	"getSeries":              "GetSeries",
	"cancelSeries":           "CancelSeries",
	"createOrder":            "CreateOrder",
	"listOrders":             "ListOrders",
	"getOrder":               "GetOrder",
	"cancelOrder":            "CancelOrder",
	"listEvents":             "Events",
	"createWebhook":          "CreateWebhook",
	"listWebhooks":           "ListWebhooks",
	"deleteWebhook":          "DeleteWebhook",
	"listWebhookDeliveries":  "Deliveries",
	"getClock":               "Clock",
	"setClock":               "SetClock",
	"createJob":              "CreateJob",
	"listJobs":               "ListJobs",
	"getJob":                 "GetJob",
	"getJobLogs":             "JobLogs",
	"stopJob":                "StopJob",
	"failNode":               "FailNode",
	"recoverNode":            "RecoverNode",
	"createTeam":             "CreateTeam",
	"listTeams":              "Teams",
	"getTeam":                "Team",
	"putQuotas":              "PutQuota",
	"getQuotas":              "Quotas",
	"putBudget":              "PutBudget",
	"getLedger":              "Ledger",
	"getSpend":               "Spend",
	"createUser":             "CreateUser",
	"disableUser":            "SetUserDisabled",
	"enableUser":             "SetUserDisabled",
	"disableTeam":            "SetTeamDisabled",
	"enableTeam":             "SetTeamDisabled",
	"listUsers":              "Users",
	"whoami":                 "WhoAmI",
	"createToken":            "CreateToken",
	"listTokens":             "Tokens",
	"revokeToken":            "RevokeToken",
	"createAccessKey":        "CreateAccessKey",
	"listAccessKeys":         "AccessKeys",
	"revokeAccessKey":        "RevokeAccessKey",
	"listAudit":              "Audit",
	"getUtilisation":         "Utilisation",
}

// UseCaseOf returns the use case an operation calls ("" for a public
// one) and whether the operation is known.
func UseCaseOf(operationID string) (contract.UseCase, bool) {
	uc, ok := useCases[operationID]
	return uc, ok
}

// principalOf is who the request acts as; the zero Principal on public
// routes.
func principalOf(ctx context.Context) core.Principal {
	p, _ := contract.PrincipalOf(ctx)
	return p
}

// scopeOf is the scope of the caller's calls (contract.Scope).
func scopeOf(ctx context.Context) string {
	return contract.Scope(principalOf(ctx))
}

// teamFor is the team a purchase or a webhook is made for
// (contract.TeamOf); whether the caller may act for it, the service
// decides.
func (s *server) teamFor(ctx context.Context, named string) string {
	return contract.TeamOf(principalOf(ctx), named)
}

// accessNote says who may call an operation of use case uc, from
// contract's access table, for the OpenAPI document.
func accessNote(uc contract.UseCase) string {
	r, ok := contract.RuleOf(uc)
	if !ok {
		return "No one: this operation has no access rule."
	}
	switch r.Reach {
	case contract.ReachTeam:
		return fmt.Sprintf("Needs the %s role, on the caller's own team's things (an admin's: every team's). Use case %s.", r.Role, uc)
	case contract.ReachOwn:
		return fmt.Sprintf("Needs the %s role, on the caller's own credentials (an admin's: anyone's). Use case %s.", r.Role, uc)
	}
	return fmt.Sprintf("Needs the %s role. Use case %s.", r.Role, uc)
}

// mustHaveAccessRules panics when a registered operation has no use case,
// or one that contract's access table lacks: a route without a rule is a
// bug, caught at start.
func mustHaveAccessRules(api huma.API) {
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op == nil {
				continue
			}
			uc, ok := useCases[op.OperationID]
			if !ok {
				panic(fmt.Sprintf("api: operation %s (%s %s) has no use case", op.OperationID, op.Method, path))
			}
			if _, ok := contract.RuleOf(uc); uc != public && !ok {
				panic(fmt.Sprintf("api: operation %s (%s %s) calls use case %s, which has no access rule", op.OperationID, op.Method, path, uc))
			}
		}
	}
}

// guard authenticates every non-public operation, checks the caller's
// role, limits request rates and records mutating requests in the audit
// log.
//
// Rates are counted per user, so that all of a user's tokens share one
// bucket (making more tokens buys no more requests), and, for requests
// without a valid token, per client address. Those requests name no one,
// so the audit log keeps only the first of each address in a minute (see
// anonymousAudits): a flood of them can neither pass the limit nor grow
// the log request by request, and the log still shows that they came.
type guard struct {
	api     huma.API
	svc     contract.Front
	limiter *httpx.Limiter
	now     func() time.Time
	// anonymous picks the requests without a valid token that the audit
	// log records.
	anonymous anonymousAudits
}

func (g *guard) middleware(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	uc, ok := useCases[op.OperationID]
	if !ok {
		// New refuses to start with an unlisted operation; be safe anyway.
		_ = huma.WriteErr(g.api, ctx, http.StatusForbidden, "this operation has no access rule")
		return
	}
	if uc == public {
		next(ctx)
		return
	}
	// 1. Who is it?
	token, err := auth.FromHeader(ctx.Header("Authorization"))
	if err != nil {
		g.unauthenticated(ctx, `Bearer realm="capblock"`, "a valid API token is required: send Authorization: Bearer cbt_… (capblock login stores one for the CLI)")
		return
	}
	p, err := g.svc.Authenticate(ctx.Context(), token)
	if err != nil {
		if errors.Is(err, core.ErrUnauthenticated) {
			g.unauthenticated(ctx, `Bearer realm="capblock", error="invalid_token"`, err.Error())
			return
		}
		recordError(ctx.Context(), err)
		_ = huma.WriteErr(g.api, ctx, http.StatusInternalServerError, internalDetail)
		return
	}
	// 2. How fast? One bucket per user, whichever token it sends.
	if wait, ok := g.limiter.Allow(httpx.UserKey(p.User.ID)); !ok {
		g.tooMany(ctx, wait, fmt.Sprintf("too many requests by user %s, whose tokens share one limit", p.User.Name))
		return
	}
	// 3. May it? The service decides on every call; asking the table
	// first refuses a role too low before the request is read.
	ctx = huma.WithContext(ctx, contract.WithPrincipal(ctx.Context(), p))
	if err := contract.Permitted(ctx.Context(), uc); err != nil {
		_ = huma.WriteErr(g.api, ctx, http.StatusForbidden, err.Error())
		g.audit(ctx, p)
		return
	}
	var intent *contract.AuditIntent
	if mutating(ctx.Method()) {
		intent = contract.NewAuditIntent(g.success(ctx, p))
		ctx = huma.WithContext(ctx, contract.WithAudit(ctx.Context(), intent))
	}
	next(ctx)
	if intent == nil || !intent.Stored() {
		g.audit(ctx, p)
	}
}

// unauthenticated answers a request without a valid token: 429 when its
// client address has sent too many such requests, 401 otherwise. A valid
// token is never held back by its address, which a reverse proxy or a
// NAT may share with whoever floods it.
func (g *guard) unauthenticated(ctx huma.Context, challenge, detail string) {
	addr := httpx.ClientAddr(ctx.RemoteAddr())
	if wait, ok := g.limiter.Allow(httpx.AddrKey(addr)); !ok {
		g.tooMany(ctx, wait, fmt.Sprintf("too many requests without a valid token from %s", addr))
		return
	}
	ctx.SetHeader("WWW-Authenticate", challenge)
	_ = huma.WriteErr(g.api, ctx, http.StatusUnauthorized, detail)
	if mutating(ctx.Method()) && g.anonymous.first(addr, g.now()) {
		g.audit(ctx, core.Principal{})
	}
}

// tooMany answers 429 with the wait in Retry-After and in the detail.
func (g *guard) tooMany(ctx huma.Context, wait time.Duration, why string) {
	ctx.SetHeader("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	_ = huma.WriteErr(g.api, ctx, http.StatusTooManyRequests, fmt.Sprintf("%s; retry in %s", why, wait.Round(time.Millisecond)))
}

func mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// record is the audit record of a request by p, without its outcome.
func (g *guard) record(ctx huma.Context, p core.Principal) core.AuditRecord {
	return core.AuditRecord{
		User: p.User.ID, Team: p.User.Team, TokenID: p.TokenID,
		Method: ctx.Method(), Route: ctx.Operation().Path, Subject: ctx.Param("id"),
	}
}

// success is the audit record of a request by p as it reads when the
// request succeeds: with the status of its operation's answer. The
// service, which stores it with the change it commits, adds only its
// time and outcome (contract.AuditIntent).
func (g *guard) success(ctx huma.Context, p core.Principal) core.AuditRecord {
	r := g.record(ctx, p)
	r.Status = ctx.Operation().DefaultStatus
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r
}

// audit records a mutating request: who, which token, what, the outcome.
// A request refused for its token is recorded with no user.
func (g *guard) audit(ctx huma.Context, p core.Principal) {
	if !mutating(ctx.Method()) {
		return
	}
	status := ctx.Status()
	if status == 0 {
		status = http.StatusOK
	}
	outcome := contract.OutcomeOK
	if status >= 400 {
		outcome = codeForStatus(status)
	}
	r := g.record(ctx, p)
	r.Status, r.Outcome = status, outcome
	g.svc.RecordAudit(ctx.Context(), r)
}

// maxAnonymousAudits bounds the audit records of requests without a
// valid token: one per client address a minute, of at most this many
// addresses a minute.
const maxAnonymousAudits = 100

// anonymousAudits remembers when the audit log last recorded a request
// without a valid token from each client address. The zero value is
// ready.
type anonymousAudits struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// first reports whether a request from addr at now is to be recorded: it
// is the first from addr in a minute, and fewer than maxAnonymousAudits
// addresses were recorded in that minute.
func (a *anonymousAudits) first(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.last[addr]; ok && now.Sub(t) < time.Minute {
		return false
	}
	if a.last == nil {
		a.last = map[string]time.Time{}
	}
	if len(a.last) >= maxAnonymousAudits {
		for k, t := range a.last {
			if now.Sub(t) >= time.Minute {
				delete(a.last, k)
			}
		}
		if len(a.last) >= maxAnonymousAudits {
			return false
		}
	}
	a.last[addr] = now
	return true
}

// alsoCalls are the further use cases an operation calls, past its own
// (useCases), which needs no more than they do.
var alsoCalls = map[string][]contract.UseCase{
	"getBlock": {"BlockDetail"},
}

// Operations returns the use cases each operation calls, by operation id
// (none for a public one).
func Operations() map[string][]contract.UseCase {
	out := make(map[string][]contract.UseCase, len(useCases))
	for op, uc := range useCases {
		if uc != public {
			out[op] = append([]contract.UseCase{uc}, alsoCalls[op]...)
		} else {
			out[op] = nil
		}
	}
	return out
}
