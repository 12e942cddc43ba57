package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"golang.org/x/time/rate"

	"capblock/internal/auth"
	"capblock/internal/core"
)

// public marks an operation that needs no token.
const public core.Role = ""

// access is the role each operation needs. Every registered operation must
// be listed: New panics on one that is not, so a new route cannot be
// forgotten, and the authorization matrix test walks this table against
// the router. Team scoping (another team's resource answers not_found) is
// applied on top, by the handlers.
var access = map[string]core.Role{
	"healthz": public,
	"readyz":  public,

	"listInstanceTypes": core.RoleViewer,
	"listNodes":         core.RoleViewer,
	"getAvailability":   core.RoleViewer,

	"searchOfferings":        core.RoleViewer,
	"purchaseBlock":          core.RoleMember,
	"listBlocks":             core.RoleViewer,
	"getBlock":               core.RoleViewer,
	"cancelBlock":            core.RoleMember,
	"approveBlock":           core.RoleAdmin,
	"listExtensionOfferings": core.RoleViewer,
	"extendBlock":            core.RoleMember,
	"getBlockStatus":         core.RoleViewer,

	"searchPlanOfferings": core.RoleViewer,
	"purchasePlan":        core.RoleMember,
	"listPlans":           core.RoleViewer,
	"getPlan":             core.RoleViewer,

	"listEvents": core.RoleViewer,

	"createWebhook":         core.RoleMember,
	"listWebhooks":          core.RoleViewer,
	"deleteWebhook":         core.RoleMember,
	"listWebhookDeliveries": core.RoleViewer,

	"getClock": core.RoleViewer,
	"setClock": core.RoleAdmin,

	"createJob":  core.RoleMember,
	"listJobs":   core.RoleViewer,
	"getJob":     core.RoleViewer,
	"getJobLogs": core.RoleViewer,
	"stopJob":    core.RoleMember,

	"failNode":    core.RoleAdmin,
	"recoverNode": core.RoleAdmin,

	"createTeam":  core.RoleAdmin,
	"listTeams":   core.RoleViewer,
	"getTeam":     core.RoleViewer,
	"putQuotas":   core.RoleAdmin,
	"getQuotas":   core.RoleViewer,
	"putBudget":   core.RoleAdmin,
	"getLedger":   core.RoleViewer,
	"getSpend":    core.RoleViewer,
	"createUser":  core.RoleAdmin,
	"listUsers":   core.RoleViewer,
	"whoami":      core.RoleViewer,
	"createToken": core.RoleViewer, // one's own; an admin anyone's
	"listTokens":  core.RoleViewer,
	"revokeToken": core.RoleViewer, // one's own; an admin anyone's
	"listAudit":   core.RoleAdmin,
}

// AccessRule returns the role an operation needs ("" for public) and
// whether the operation is known.
func AccessRule(operationID string) (core.Role, bool) {
	r, ok := access[operationID]
	return r, ok
}

type principalKey struct{}

// principalOf is who the request acts as; the zero Principal on public
// routes.
func principalOf(ctx context.Context) core.Principal {
	p, _ := ctx.Value(principalKey{}).(core.Principal)
	return p
}

// scopeOf is the team whose things the caller may see: "" (every team)
// for an admin, the caller's own team otherwise.
func scopeOf(ctx context.Context) string {
	p := principalOf(ctx)
	if p.User.Role == core.RoleAdmin {
		return ""
	}
	return p.User.Team
}

// teamFor is the team a purchase is made for: the caller's own, or for an
// admin the team named in the body, which must exist.
func (s *server) teamFor(ctx context.Context, named string) (string, error) {
	p := principalOf(ctx)
	if named == "" || named == p.User.Team {
		return p.User.Team, nil
	}
	if p.User.Role != core.RoleAdmin {
		return "", fmt.Errorf("%w: only an admin may act for another team", core.ErrForbidden)
	}
	if _, err := s.svc.Team(ctx, "", named); err != nil {
		return "", core.Invalidf("team %q does not exist (GET /v1/teams lists them)", named)
	}
	return named, nil
}

// mustHaveAccessRules panics when a registered operation has no entry in
// the access table: a route without a rule is a bug, caught at start.
func mustHaveAccessRules(api huma.API) {
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op == nil {
				continue
			}
			if _, ok := access[op.OperationID]; !ok {
				panic(fmt.Sprintf("api: operation %s (%s %s) has no access rule", op.OperationID, op.Method, path))
			}
		}
	}
}

// guard authenticates every non-public operation, checks the caller's
// role, limits each token's request rate and records mutating requests in
// the audit log.
type guard struct {
	api     huma.API
	svc     Service
	limiter *limiter
}

func (g *guard) middleware(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	need, ok := access[op.OperationID]
	if !ok {
		// New refuses to start with an unlisted operation; be safe anyway.
		_ = huma.WriteErr(g.api, ctx, http.StatusForbidden, "this operation has no access rule")
		return
	}
	if need == public {
		next(ctx)
		return
	}
	// 1. Who is it?
	token, err := auth.FromHeader(ctx.Header("Authorization"))
	if err != nil {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="capblock"`)
		_ = huma.WriteErr(g.api, ctx, http.StatusUnauthorized, "a valid API token is required: send Authorization: Bearer cbt_… (capblock login stores one for the CLI)")
		g.audit(ctx, core.Principal{})
		return
	}
	p, err := g.svc.Authenticate(ctx.Context(), token)
	if err != nil {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="capblock", error="invalid_token"`)
		if errors.Is(err, core.ErrUnauthenticated) {
			_ = huma.WriteErr(g.api, ctx, http.StatusUnauthorized, err.Error())
			g.audit(ctx, core.Principal{})
			return
		}
		recordError(ctx.Context(), err)
		_ = huma.WriteErr(g.api, ctx, http.StatusInternalServerError, internalDetail)
		return
	}
	// 2. How fast?
	if wait, ok := g.limiter.allow(p.TokenID); !ok {
		ctx.SetHeader("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		_ = huma.WriteErr(g.api, ctx, http.StatusTooManyRequests, fmt.Sprintf("too many requests with token %s; retry in %s", p.TokenID, wait.Round(time.Millisecond)))
		return
	}
	// 3. May it?
	if !p.User.Role.Allows(need) {
		_ = huma.WriteErr(g.api, ctx, http.StatusForbidden, fmt.Sprintf("%s needs the %s role; user %s is a %s", op.OperationID, need, p.User.Name, p.User.Role))
		g.audit(ctx, p)
		return
	}
	ctx = huma.WithValue(ctx, principalKey{}, p)
	intent := &AuditIntent{}
	if mutating(ctx.Method()) {
		intent.rec = g.record(ctx, p)
		ctx = huma.WithValue(ctx, auditKey{}, intent)
	}
	next(ctx)
	if !intent.stored.Load() {
		g.audit(ctx, p)
	}
}

type auditKey struct{}

// AuditIntent is the audit record of a mutating request in progress. The
// service may store it with the change that the request commits (Take and
// Stored), so that the change is never durable without its record; the
// guard then does not store it again. Otherwise the guard stores it once
// the answer is known.
type AuditIntent struct {
	rec    core.AuditRecord
	stored atomic.Bool
}

// PendingAudit returns the audit intent of the request of ctx, or nil.
func PendingAudit(ctx context.Context) *AuditIntent {
	a, _ := ctx.Value(auditKey{}).(*AuditIntent)
	return a
}

// Take returns the record for a request that succeeds at now with status;
// subject names what it made, when its route names nothing (a purchase's
// new block).
func (a *AuditIntent) Take(now time.Time, status int, subject string) core.AuditRecord {
	r := a.rec
	r.Time, r.Status, r.Outcome = now, status, "ok"
	if r.Subject == "" {
		r.Subject = subject
	}
	return r
}

// Stored says that a committed change holds the record.
func (a *AuditIntent) Stored() { a.stored.Store(true) }

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
	outcome := "ok"
	if status >= 400 {
		outcome = codeForStatus(status)
	}
	r := g.record(ctx, p)
	r.Status, r.Outcome = status, outcome
	g.svc.RecordAudit(ctx.Context(), r)
}

// limiter is a token bucket per API token.
type limiter struct {
	rps   rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newLimiter(rps float64, burst int) *limiter {
	return &limiter{rps: rate.Limit(rps), burst: burst, buckets: map[string]*rate.Limiter{}}
}

// allow takes one request from the token's bucket, or says how long to
// wait for one. A limiter with no rate lets everything through.
func (l *limiter) allow(tokenID string) (time.Duration, bool) {
	if l.rps <= 0 {
		return 0, true
	}
	l.mu.Lock()
	b, ok := l.buckets[tokenID]
	if !ok {
		b = rate.NewLimiter(l.rps, l.burst)
		l.buckets[tokenID] = b
	}
	l.mu.Unlock()
	r := b.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return d, false
	}
	return 0, true
}
