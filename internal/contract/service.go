// Package contract is the use cases' contract: the Service interface that
// the service package implements, its requests and views, the rules of
// roles and scopes, and the audit record a request leaves. Every front end
// (the REST API, later the AWS protocols and the web console) adapts its
// own protocol onto it, and the service depends on no front end.
package contract

import (
	"context"
	"time"

	"capblock/internal/core"
)

// Gate is what a front end calls before it knows who calls: to find the
// principal a credential stands for, to record what a request did, and
// the service's health and clock. It returns no team's things.
type Gate interface {
	// Authenticate returns who a token belongs to, or an error wrapping
	// core.ErrUnauthenticated.
	Authenticate(ctx context.Context, token string) (core.Principal, error)
	// AuthenticateAccessKey returns the secret of a live access key and who it
	// acts as (the user's role and team, as with bearer tokens), or an error
	// wrapping core.ErrUnauthenticated (unknown, revoked, or its user gone).
	// A key whose user or team is disabled is refused with the secret
	// still returned, so that the signature is checked before the reason
	// is told.
	AuthenticateAccessKey(ctx context.Context, accessKeyID string) (secret string, p core.Principal, err error)
	// Workloads is the principal of a team's workloads (the pods of a
	// namespace labelled with the team): a viewer of the team, so that
	// admission reads the team's blocks and nothing else. An unknown or
	// disabled team wraps core.ErrUnauthenticated.
	Workloads(ctx context.Context, team string) (core.Principal, error)
	// RecordAudit stores the record of one mutating request.
	RecordAudit(ctx context.Context, r core.AuditRecord)
	// Ready reports whether the service can serve (database reachable).
	Ready(ctx context.Context) error
	// Now is the service's time; Simulated reports whether its clock is
	// simulated (then the Clock and SetClock use cases exist).
	Now() time.Time
	Simulated() bool
	// Sells reports whether node is one of the fleet's nodes, which
	// admission keeps pods without a block off.
	Sells(node string) bool
}

// Front is what a front end is given: the Gate, and the Service it calls
// once it knows who calls.
type Front interface {
	Gate
	Service
}

// Checked is embedded by an implementation of Service that checks the
// access table (Authorize, AuthorizeTeam) on every call; nothing else can
// be handed to a front end as a Service.
type Checked struct{}

func (Checked) checksAccess() {}

// Service is what every front end calls, with the caller's principal in
// the context (WithPrincipal). The service package implements it and
// checks every call against the access table: a call with no principal,
// a role too low, or a scope that names another team is refused. Every
// error it returns wraps one of core's sentinel errors (or is internal),
// which each front end maps to its own error codes.
//
// It is made of role-sized parts, one per area; the access table gives
// each method its role.
//
// A team or scope argument names the team whose things the call is on:
// Scope of the caller when it names none ("" for an admin, who sees every
// team, the caller's own team otherwise); another team's things are then
// not found.
type Service interface {
	checksAccess()

	Catalog
	Blocks
	Plans
	Notifications
	Jobs
	Accounts
	Operations
}

// Catalog is the fleet and the search for capacity: what can be bought,
// where and when, at what price.
type Catalog interface {
	// Fleet returns the fleet as it is now (nodes with health, types).
	Fleet(ctx context.Context) (core.Fleet, error)
	// Nodes returns the fleet's nodes with their health now and its
	// stored record, which every replica shares.
	Nodes(ctx context.Context) ([]NodeView, error)
	// Availability returns the free instances of a type per hour in
	// [from, to), for one zone or, when zone is empty, all zones summed.
	Availability(ctx context.Context, instanceType, zone string, from, to time.Time) ([]core.Slot, error)
	// Offerings searches priced, signed offerings.
	Offerings(ctx context.Context, req core.SearchRequest) ([]core.Offering, error)
	// PriceCalendar prices every hourly start of one type, count and
	// exact duration in a window, with whether it is free (core.Index.
	// PriceCalendar); req.Team's quota bounds it as it bounds a search.
	PriceCalendar(ctx context.Context, req core.SearchRequest) ([]core.PriceStart, error)
	// FleetCalendar returns per GPU model and zone the free GPUs per hour
	// over [from, from+hours), the blocks of scope's team in full and
	// other teams' as GPU counts only (scope "": an admin holds them all).
	FleetCalendar(ctx context.Context, scope string, from time.Time, hours int) ([]core.PoolCalendar, error)
	// Clock is the simulated clock's time; SetClock moves it (an admin):
	// to req.Set when given, else forward by req.Advance. Both wrap
	// core.ErrNotFound on the wall clock.
	Clock(ctx context.Context) (time.Time, error)
}

// Blocks are capacity blocks: bought, read, extended, handed on,
// cancelled.
type Blocks interface {
	// Purchase buys an offering. created is false when the client token
	// was seen before and the earlier block is returned.
	Purchase(ctx context.Context, req PurchaseRequest) (b core.Block, created bool, err error)
	ListBlocks(ctx context.Context, team string, state core.BlockState) ([]core.Block, error)
	GetBlock(ctx context.Context, team, id string) (core.Block, error)
	CancelBlock(ctx context.Context, team, id string) (core.Block, error)
	// CancelQuote is the refund that cancelling a block now would give,
	// without cancelling it.
	CancelQuote(ctx context.Context, team, id string) (core.Money, error)
	ExtensionOfferings(ctx context.Context, team, id string, duration time.Duration) ([]core.Offering, error)
	// Extend buys an extension offering of a block. The same offering
	// bought again for the same block answers the extension it bought,
	// charged once.
	Extend(ctx context.Context, team, id, offeringID string) (Extension, error)
	BlockStatus(ctx context.Context, team, id string) (BlockStatus, error)
	// Handing hours on. TransferBlock gives a block's hours (the whole
	// block before its start, else the rest from the next whole hour) to
	// another team, where the fleet's transfer policy allows;
	// ReleaseBlock releases them for resale, crediting the holder for
	// what another purchase buys back. BlockDetail shows a block's
	// hand-overs and its utilisation so far. Another team's block is not
	// found.
	TransferBlock(ctx context.Context, req TransferRequest) (HandOnResult, error)
	ReleaseBlock(ctx context.Context, team, id string) (HandOnResult, error)
	BlockDetail(ctx context.Context, team, id string) (BlockDetail, error)
	// SetLending lends a block's GPUs to backfill while its holder runs
	// no job on them (on), or stops lending them (off).
	SetLending(ctx context.Context, team, id string, on bool) (core.Block, error)
	// Utilisation reports what became of reserved GPU-hours over [from,
	// to) (zero bounds: all time up to now), per block, plan and team.
	// A team other than scope's is not found; team "" means every team
	// in scope.
	Utilisation(ctx context.Context, scope, team string, from, to time.Time) (UtilisationReport, error)
}

// Plans are training plans, recurring blocks (series) and standing orders.
type Plans interface {
	// Training plans. PlanOfferings searches priced, signed plan
	// offerings; PurchasePlan buys one (created is false when the client
	// token was seen before and the earlier plan is returned). A team of
	// "" (an admin) sees every team's plans; another team's is not found.
	PlanOfferings(ctx context.Context, req core.PlanSearchRequest) ([]core.PlanOffering, error)
	PurchasePlan(ctx context.Context, req PlanPurchaseRequest) (p PlanView, created bool, err error)
	ListPlans(ctx context.Context, team string) ([]PlanView, error)
	GetPlan(ctx context.Context, team, id string) (PlanView, error)
	// CancelPlan cancels every segment of a plan still to come or active,
	// each under the refund policy, in one commit.
	CancelPlan(ctx context.Context, team, id string) (PlanView, error)
	// Recurring blocks (series). SeriesOfferings quotes a schedule's
	// occurrences, signed; PurchaseSeries buys one quote's occurrences in
	// one commit (created is false when the client token was seen before
	// and the earlier series is returned); CancelSeries cancels every
	// occurrence not yet ended, each refunded per the operator's policy.
	SeriesOfferings(ctx context.Context, req SeriesSearchRequest) ([]core.SeriesOffering, error)
	PurchaseSeries(ctx context.Context, req SeriesPurchaseRequest) (s SeriesView, created bool, err error)
	ListSeries(ctx context.Context, team string) ([]SeriesView, error)
	GetSeries(ctx context.Context, team, id string) (SeriesView, error)
	CancelSeries(ctx context.Context, team, id string) (SeriesView, error)
	// Standing orders: requests that wait until capacity frees, then
	// notify or buy, first come first served, until their deadline.
	CreateOrder(ctx context.Context, req OrderRequest) (core.Order, error)
	ListOrders(ctx context.Context, team string) ([]core.Order, error)
	GetOrder(ctx context.Context, team, id string) (core.Order, error)
	CancelOrder(ctx context.Context, team, id string) (core.Order, error)
}

// Notifications are a team's events and the webhooks that deliver them.
type Notifications interface {
	// Events returns events after the cursor ("" = from the start), waiting
	// up to wait for at least one; next is the cursor to pass next time.
	Events(ctx context.Context, team, after string, wait time.Duration) (events []core.Event, next string, err error)
	// Webhooks. A scope is the team a caller may see, "" for an admin;
	// another team's webhook is not found. CreateWebhook returns the
	// webhook with its secret, which no other call shows.
	CreateWebhook(ctx context.Context, team, url string, events []string) (core.Webhook, error)
	ListWebhooks(ctx context.Context, scope string) ([]core.Webhook, error)
	DeleteWebhook(ctx context.Context, scope, id string) (core.Webhook, error)
	Deliveries(ctx context.Context, scope, id string) ([]core.Delivery, error)
}

// Jobs are commands run on a block's GPUs.
type Jobs interface {
	// Jobs: commands run on a block's GPUs. A scope is the team a caller
	// may see, "" for an admin.
	CreateJob(ctx context.Context, scope string, req JobRequest) (core.Job, error)
	ListJobs(ctx context.Context, scope string) ([]core.Job, error)
	GetJob(ctx context.Context, scope, id string) (core.Job, error)
	StopJob(ctx context.Context, scope, id string) (core.Job, error)
	JobLogs(ctx context.Context, scope, id string, instance int, offset int64, limit int) ([]byte, int64, error)
}

// Accounts are teams, users, and their tokens and access keys, and what
// the team may spend.
type Accounts interface {
	Teams(ctx context.Context, scope string) ([]core.Team, error)
	Team(ctx context.Context, scope, id string) (core.Team, error)
	Users(ctx context.Context, scope string) ([]core.User, error)
	// WhoAmI is the caller.
	WhoAmI(ctx context.Context) (core.Principal, error)
	// Tokens and access keys are the caller's own; an admin's, anyone's.
	CreateToken(ctx context.Context, userID string, expiresIn time.Duration) (core.Token, string, error)
	Tokens(ctx context.Context) ([]core.Token, error)
	RevokeToken(ctx context.Context, id string) (core.Token, error)
	// Access keys of the AWS protocols, made, listed and revoked by the
	// rules of tokens. CreateAccessKey returns the key and its secret,
	// which no other call shows; RevokeAccessKey takes the key's id or
	// its access key id.
	CreateAccessKey(ctx context.Context, userID string) (core.AccessKey, string, error) // the key and its secret
	AccessKeys(ctx context.Context) ([]core.AccessKey, error)
	RevokeAccessKey(ctx context.Context, id string) (core.AccessKey, error)
	Quotas(ctx context.Context, scope, team string) ([]core.Quota, error)
	Ledger(ctx context.Context, scope, team string) (LedgerView, error)
	// Spend sums the ledger by team, instance type and month in [from, to).
	Spend(ctx context.Context, scope, team string, from, to time.Time) (SpendReport, error)
}

// Operations are the operator's acts (an admin's): approvals, nodes, the
// clock, teams and users made and disabled, quotas and budgets set, the
// audit log.
type Operations interface {
	// ApproveBlock approves a block waiting for approval (admin).
	ApproveBlock(ctx context.Context, id string) (core.Block, error)
	// FailNode and RecoverNode are an admin's word on a node's health:
	// stored with the changes to the blocks on it, in one commit. reason
	// (optional) says why the node is failed.
	FailNode(ctx context.Context, name, reason string) (NodeReport, error)
	RecoverNode(ctx context.Context, name string) (NodeReport, error)
	SetClock(ctx context.Context, req ClockRequest) (time.Time, error)
	// Teams, users, tokens and access keys. A scope is the team a caller may see, ""
	// for an admin (every team).
	CreateTeam(ctx context.Context, name string) (core.Team, error)
	CreateUser(ctx context.Context, name, team string, role core.Role) (core.User, error)
	// SetUserDisabled and SetTeamDisabled disable (or enable again) a
	// user or a team, as an administrator p: a disabled user's or team's
	// tokens and access keys stop authenticating, and a disabled team buys
	// nothing. p cannot disable themself or their own team.
	SetUserDisabled(ctx context.Context, id string, disabled bool) (core.User, error)
	SetTeamDisabled(ctx context.Context, id string, disabled bool) (core.Team, error)
	// Quotas, budgets and the ledger.
	PutQuota(ctx context.Context, q core.Quota) (core.Quota, error)
	PutBudget(ctx context.Context, b core.Budget) (core.Budget, error)
	Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error)
}
