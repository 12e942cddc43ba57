package api

import (
	"context"
	"time"

	"capblock/internal/core"
)

// Service is what the HTTP layer calls. The service package implements it;
// every error it returns wraps one of core's sentinel errors (or is
// internal), which the API maps to a problem code.
type Service interface {
	// Fleet returns the fleet as it is now (nodes with health, types).
	Fleet() core.Fleet
	// Availability returns the free instances of a type per hour in
	// [from, to), for one zone or, when zone is empty, all zones summed.
	Availability(ctx context.Context, instanceType, zone string, from, to time.Time) ([]core.Slot, error)
	// Offerings searches priced, signed offerings.
	Offerings(ctx context.Context, req core.SearchRequest) ([]core.Offering, error)
	// Purchase buys an offering. created is false when the client token
	// was seen before and the earlier block is returned.
	Purchase(ctx context.Context, req PurchaseRequest) (b core.Block, created bool, err error)
	ListBlocks(ctx context.Context, team string, state core.BlockState) ([]core.Block, error)
	GetBlock(ctx context.Context, team, id string) (core.Block, error)
	CancelBlock(ctx context.Context, team, id string) (core.Block, error)
	// ApproveBlock approves a block waiting for approval (admin).
	ApproveBlock(ctx context.Context, id string) (core.Block, error)
	ExtensionOfferings(ctx context.Context, team, id string, duration time.Duration) ([]core.Offering, error)
	Extend(ctx context.Context, team, id, offeringID string) (core.Block, error)
	BlockStatus(ctx context.Context, team, id string) (BlockStatus, error)
	// Training plans. PlanOfferings searches priced, signed plan
	// offerings; PurchasePlan buys one (created is false when the client
	// token was seen before and the earlier plan is returned). A team of
	// "" (an admin) sees every team's plans; another team's is not found.
	PlanOfferings(ctx context.Context, req core.PlanSearchRequest) ([]core.PlanOffering, error)
	PurchasePlan(ctx context.Context, req PlanPurchaseRequest) (p PlanView, created bool, err error)
	ListPlans(ctx context.Context, team string) ([]PlanView, error)
	GetPlan(ctx context.Context, team, id string) (PlanView, error)
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
	// Ready reports whether the service can serve (database reachable).
	Ready(ctx context.Context) error
	// SimClock returns the simulated clock, or nil when the server runs on
	// the wall clock (then /v1/admin/clock does not exist).
	SimClock() SimClock

	// Authenticate returns who a token belongs to, or an error wrapping
	// core.ErrUnauthenticated.
	Authenticate(ctx context.Context, token string) (core.Principal, error)
	// RecordAudit stores the record of one mutating request.
	RecordAudit(ctx context.Context, r core.AuditRecord)
	Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error)

	// Teams, users and tokens. A scope is the team a caller may see, ""
	// for an admin (every team).
	CreateTeam(ctx context.Context, name string) (core.Team, error)
	Teams(ctx context.Context, scope string) ([]core.Team, error)
	Team(ctx context.Context, scope, id string) (core.Team, error)
	CreateUser(ctx context.Context, name, team string, role core.Role) (core.User, error)
	Users(ctx context.Context, scope string) ([]core.User, error)
	CreateToken(ctx context.Context, p core.Principal, userID string, expiresIn time.Duration) (core.Token, string, error)
	Tokens(ctx context.Context, p core.Principal) ([]core.Token, error)
	RevokeToken(ctx context.Context, p core.Principal, id string) (core.Token, error)

	// Quotas, budgets and the ledger.
	PutQuota(ctx context.Context, q core.Quota) (core.Quota, error)
	Quotas(ctx context.Context, scope, team string) ([]core.Quota, error)
	PutBudget(ctx context.Context, b core.Budget) (core.Budget, error)
	Ledger(ctx context.Context, scope, team string) (LedgerView, error)
	// Jobs: commands run on a block's GPUs. A scope is the team a caller
	// may see, "" for an admin.
	CreateJob(ctx context.Context, scope string, req JobRequest) (core.Job, error)
	ListJobs(ctx context.Context, scope string) ([]core.Job, error)
	GetJob(ctx context.Context, scope, id string) (core.Job, error)
	StopJob(ctx context.Context, scope, id string) (core.Job, error)
	JobLogs(ctx context.Context, scope, id string, instance int, offset int64, limit int) ([]byte, int64, error)
	// FailNode and RecoverNode change a node's health (admin, sim backend).
	FailNode(ctx context.Context, name string) (NodeReport, error)
	RecoverNode(ctx context.Context, name string) (NodeReport, error)
	// Spend sums the ledger by team, instance type and month in [from, to).
	Spend(ctx context.Context, scope, team string, from, to time.Time) (SpendReport, error)
}

// SpendRow is the net spend of one team on one type in one month, and
// what the same instance-hours cost on demand.
type SpendRow struct {
	Team         string
	InstanceType string
	Month        string // YYYY-MM
	Spent        core.Money
	OnDemand     core.Money
}

// SpendReport is the rows and their total (whose keys are empty).
type SpendReport struct {
	Rows  []SpendRow
	Total SpendRow
}

// LedgerView is a team's ledger with its spend in the current budget
// period (all time without a budget) and its budget, when set.
type LedgerView struct {
	Entries []core.LedgerEntry
	Spent   core.Money
	Budget  *core.Budget
}

// SimClock is a clock that an admin call moves.
type SimClock interface {
	Now() time.Time
	Advance(d time.Duration) (time.Time, error)
	Set(t time.Time) (time.Time, error)
}

// PurchaseRequest is the body of POST /v1/blocks after decoding.
type PurchaseRequest struct {
	Team        string
	OfferingID  string
	ClientToken string
	Name        string
	Tags        map[string]string
}

// BlockStatus is GET /v1/blocks/{id}/status.
type BlockStatus struct {
	Total          int
	Available      int
	Unavailable    int
	Degraded       bool
	PlacementFinal bool
	LockInTime     time.Time
	Placements     []core.Placement
}

// Slot is the free count of one hour.
type Slot = core.Slot

// NodeReport says what a node's health change did to the blocks on it.
type NodeReport struct {
	Node      string
	Health    core.Health
	Replaced  []string // blocks moved to replacement GPUs
	Degraded  []string // blocks left short: no replacement free
	Recovered []string // degraded blocks whole again
}

// JobRequest is the body of POST /v1/jobs after decoding.
type JobRequest struct {
	Name          string
	BlockID       string
	PlanID        string
	Command       []string
	Env           map[string]string
	InstanceCount int
	MaxRestarts   int
}
