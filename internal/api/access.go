package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"golang.org/x/time/rate"

	"capblock/internal/auth"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// public marks an operation that needs no token.
const public core.Role = ""

// access is the role each operation needs, which the guard checks with
// contract.Authorize. Every registered operation must be listed: New
// panics on one that is not, so a new route cannot be forgotten, and the
// authorization matrix test walks this table against the router. Team
// scoping (another team's resource answers not_found) is applied on top:
// the handlers pass contract.Scope of the caller to the service.
var access = map[string]core.Role{
	"healthz": public,
	"readyz":  public,

	"listInstanceTypes": core.RoleViewer,
	"listNodes":         core.RoleViewer,
	"getAvailability":   core.RoleViewer,
	"getPolicy":         core.RoleViewer,
	"getFleetCalendar":  core.RoleViewer,

	"searchOfferings":        core.RoleViewer,
	"purchaseBlock":          core.RoleMember,
	"listBlocks":             core.RoleViewer,
	"getBlock":               core.RoleViewer,
	"cancelBlock":            core.RoleMember,
	"approveBlock":           core.RoleAdmin,
	"listExtensionOfferings": core.RoleViewer,
	"extendBlock":            core.RoleMember,
	"getBlockStatus":         core.RoleViewer,
	"getPriceCalendar":       core.RoleViewer,
	"getCancelQuote":         core.RoleViewer,
	"transferBlock":          core.RoleMember, // and the fleet's policy (limits.transfers)
	"releaseBlock":           core.RoleMember,
	"setBlockLending":        core.RoleMember,

	"searchPlanOfferings": core.RoleViewer,
	"purchasePlan":        core.RoleMember,
	"listPlans":           core.RoleViewer,
	"getPlan":             core.RoleViewer,
	"cancelPlan":          core.RoleMember,

	"searchSeriesOfferings": core.RoleViewer, // a search: it stores nothing
	"purchaseSeries":        core.RoleMember,
	"listSeries":            core.RoleViewer,
	"getSeries":             core.RoleViewer,
	"cancelSeries":          core.RoleMember,

	"createOrder": core.RoleMember,
	"listOrders":  core.RoleViewer,
	"getOrder":    core.RoleViewer,
	"cancelOrder": core.RoleMember,

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
	"disableUser": core.RoleAdmin,
	"enableUser":  core.RoleAdmin,
	"disableTeam": core.RoleAdmin,
	"enableTeam":  core.RoleAdmin,
	"listUsers":   core.RoleViewer,
	"whoami":      core.RoleViewer,
	"createToken": core.RoleViewer, // one's own; an admin anyone's
	"listTokens":  core.RoleViewer,
	"revokeToken": core.RoleViewer, // one's own; an admin anyone's
	// Access keys follow the rules of tokens.
	"createAccessKey": core.RoleViewer, // one's own; an admin anyone's
	"listAccessKeys":  core.RoleViewer,
	"revokeAccessKey": core.RoleViewer, // one's own; an admin anyone's
	"listAudit":       core.RoleAdmin,

	"getUtilisation": core.RoleViewer,
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

// scopeOf is the scope of the caller's calls (contract.Scope).
func scopeOf(ctx context.Context) string {
	return contract.Scope(principalOf(ctx))
}

// teamFor is the team a purchase or a webhook is made for (contract.TeamFor).
func (s *server) teamFor(ctx context.Context, named string) (string, error) {
	return contract.TeamFor(ctx, s.svc, principalOf(ctx), named)
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
	svc     contract.Service
	limiter *limiter
	// anonymous picks the requests without a valid token that the audit
	// log records.
	anonymous anonymousAudits
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
	if wait, ok := g.limiter.allow(userKey(p.User.ID)); !ok {
		g.tooMany(ctx, wait, fmt.Sprintf("too many requests by user %s, whose tokens share one limit", p.User.Name))
		return
	}
	// 3. May it?
	if err := contract.Authorize(p, op.OperationID, need); err != nil {
		_ = huma.WriteErr(g.api, ctx, http.StatusForbidden, err.Error())
		g.audit(ctx, p)
		return
	}
	ctx = huma.WithValue(ctx, principalKey{}, p)
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
	addr := clientAddr(ctx.RemoteAddr())
	if wait, ok := g.limiter.allow(addrKey(addr)); !ok {
		g.tooMany(ctx, wait, fmt.Sprintf("too many requests without a valid token from %s", addr))
		return
	}
	ctx.SetHeader("WWW-Authenticate", challenge)
	_ = huma.WriteErr(g.api, ctx, http.StatusUnauthorized, detail)
	if mutating(ctx.Method()) && g.anonymous.first(addr, g.limiter.now()) {
		g.audit(ctx, core.Principal{})
	}
}

// tooMany answers 429 with the wait in Retry-After and in the detail.
func (g *guard) tooMany(ctx huma.Context, wait time.Duration, why string) {
	ctx.SetHeader("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	_ = huma.WriteErr(g.api, ctx, http.StatusTooManyRequests, fmt.Sprintf("%s; retry in %s", why, wait.Round(time.Millisecond)))
}

// ClientAddr is clientAddr, for the other front ends' limits (the AWS
// endpoint's).
func ClientAddr(remote string) string { return clientAddr(remote) }

// clientAddr is what requests without a valid token are counted by: the
// IP address of the TCP peer, never a header such as X-Forwarded-For,
// which the client writes itself; for IPv6 its /64, since one subscriber
// is commonly given a whole /64 to pick addresses from.
func clientAddr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
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

// userKey and addrKey name the limiter's buckets: one per user, one per
// client address for requests without a valid token.
func userKey(id string) string   { return "user:" + id }
func addrKey(addr string) string { return "addr:" + addr }

// maxAddrBuckets bounds the buckets of client addresses, which a flood
// from ever new addresses could otherwise grow without end. Past it, the
// addresses not yet tracked share overflowBucket, until idle buckets are
// swept. Users' buckets are not counted: users are as many as the
// operator made.
const maxAddrBuckets = 100_000

const overflowBucket = "addr:*"

// limiter is a token bucket per key (userKey, addrKey), all with one rate
// and burst.
type limiter struct {
	rps   rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	addrs     int // buckets of client addresses
	lastSweep time.Time
}

type bucket struct {
	*rate.Limiter
	used time.Time // the last request taken from it
}

func newLimiter(rps float64, burst int) *limiter {
	return &limiter{rps: rate.Limit(rps), burst: burst, now: time.Now, buckets: map[string]*bucket{}}
}

// allow takes one request from key's bucket, or says how long to wait for
// one. A limiter with no rate lets everything through.
func (l *limiter) allow(key string) (time.Duration, bool) {
	if l.rps <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	l.sweep(now)
	b, ok := l.buckets[key]
	if !ok {
		isAddr := strings.HasPrefix(key, "addr:")
		if isAddr && l.addrs >= maxAddrBuckets {
			key, isAddr = overflowBucket, false
			b = l.buckets[key]
		}
		if b == nil {
			b = &bucket{Limiter: rate.NewLimiter(l.rps, l.burst)}
			l.buckets[key] = b
			if isAddr {
				l.addrs++
			}
		}
	}
	b.used = now
	r := b.ReserveN(now, 1)
	l.mu.Unlock()
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// sweep drops the buckets that have been idle long enough to fill up
// again: a full bucket is what a new one would be, so nothing is lost.
// It runs at most once a minute, or once a second while the addresses'
// buckets are at their bound. l.mu is held.
func (l *limiter) sweep(now time.Time) {
	since := now.Sub(l.lastSweep)
	if since < time.Minute && (l.addrs < maxAddrBuckets || since < time.Second) {
		return
	}
	l.lastSweep = now
	refill := time.Duration(float64(l.burst) / float64(l.rps) * float64(time.Second))
	for k, b := range l.buckets {
		if now.Sub(b.used) >= refill {
			delete(l.buckets, k)
			if strings.HasPrefix(k, "addr:") && k != overflowBucket {
				l.addrs--
			}
		}
	}
}
