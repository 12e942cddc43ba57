package core

import (
	"errors"
	"fmt"
	"time"
)

// Access outcomes.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
	ErrQuotaExceeded   = errors.New("quota exceeded")
	ErrBudgetExceeded  = errors.New("budget exceeded")
	// ErrUnbalanced is a journal whose postings do not sum to zero: a
	// defect, never stored.
	ErrUnbalanced  = errors.New("unbalanced journal")
	ErrRateLimited = errors.New("rate limited")
)

// Role is what a user may do.
type Role string

const (
	// RoleAdmin is the fleet operator: fleet, prices, policies, every team.
	RoleAdmin Role = "admin"
	// RoleMember searches, buys, cancels and extends within its team.
	RoleMember Role = "member"
	// RoleViewer reads its team's things.
	RoleViewer Role = "viewer"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleMember || r == RoleViewer }

// Allows reports whether a user of role r may act with the rights of need.
func (r Role) Allows(need Role) bool { return r.rank() >= need.rank() }

func (r Role) rank() int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleMember:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// Team is a tenant: it owns blocks, has members, quotas and a budget.
type Team struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// DisabledAt is when an administrator disabled the team; zero when it
	// is enabled. A disabled team's users cannot authenticate and it buys
	// nothing; what it bought runs on.
	DisabledAt time.Time
}

// User belongs to one team with one role.
type User struct {
	ID        string
	Name      string
	Team      string // team id
	Role      Role
	CreatedAt time.Time
	// DisabledAt is when an administrator disabled the user; zero when
	// enabled. A disabled user's tokens and access keys do not
	// authenticate.
	DisabledAt time.Time
}

// Token is an API token of a user. Only the hash of its secret is stored.
type Token struct {
	ID        string
	User      string
	Hash      string
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	RevokedAt time.Time // zero: not revoked
}

// Usable reports whether the token may authenticate at now.
func (t Token) Usable(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// Principal is who a request acts as.
type Principal struct {
	User    User
	TokenID string
}

// Quota bounds what a team may hold, for all instance types (InstanceType
// empty) or for one.
type Quota struct {
	Team                 string
	InstanceType         string
	MaxInstancesPerBlock int
	MaxInstancesHeld     int
	MaxDuration          time.Duration
	MaxLead              time.Duration
}

// DefaultQuota is a team's quota when an admin set none.
func DefaultQuota(l Limits) Quota {
	return Quota{MaxInstancesPerBlock: l.MaxInstancesPerBlock, MaxInstancesHeld: 256, MaxDuration: l.MaxDuration, MaxLead: l.MaxLeadTime}
}

// Budget periods.
const (
	BudgetMonth = "month"
	BudgetTotal = "total"
	BudgetNone  = "none"
)

// Budget caps a team's net spend per period.
type Budget struct {
	Team   string
	Amount Money
	Period string
}

// PeriodStart is when the budget period containing now began: the first
// of the month (UTC) for monthly budgets, the zero time for a total.
func (b Budget) PeriodStart(now time.Time) time.Time {
	if b.Period == BudgetMonth {
		now = now.UTC()
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// BudgetGuard asks a commit to check that the team's net spend since
// Since, with the change's own ledger entries, stays within Limit.
type BudgetGuard struct {
	Team  string
	Limit Money
	Since time.Time
	// Credits counts the team's credits (income from others) as negative
	// spending, making room under the budget: the operator's policy
	// (Limits.BudgetCountsCredits), off by default.
	Credits bool
}

// AuditRecord is one mutating request: who, with which token, what, when,
// and the outcome.
type AuditRecord struct {
	Seq     int64
	Time    time.Time
	User    string
	Team    string
	TokenID string
	Method  string
	Route   string
	Subject string
	Status  int
	Outcome string
}

// CheckQuota decides whether a team may buy count instances of a type for
// [start, end) at now, given the instances it already holds at the
// busiest hour of that window.
func CheckQuota(q Quota, count int, start, end, now time.Time, held int) error {
	switch {
	case q.MaxInstancesPerBlock > 0 && count > q.MaxInstancesPerBlock:
		return fmt.Errorf("%w: %d instances in one block, above the team's limit of %d per block", ErrQuotaExceeded, count, q.MaxInstancesPerBlock)
	case q.MaxInstancesHeld > 0 && held+count > q.MaxInstancesHeld:
		return fmt.Errorf("%w: the team would hold %d instances at once (%d already), above its limit of %d", ErrQuotaExceeded, held+count, held, q.MaxInstancesHeld)
	case q.MaxDuration > 0 && end.Sub(start) > q.MaxDuration:
		return fmt.Errorf("%w: a block of %s, above the team's longest of %s", ErrQuotaExceeded, fmtHours(end.Sub(start)), fmtHours(q.MaxDuration))
	case q.MaxLead > 0 && start.Sub(now) > q.MaxLead:
		return fmt.Errorf("%w: a start %s ahead, beyond the team's limit of %s", ErrQuotaExceeded, fmtHours(start.Sub(now).Truncate(time.Hour)), fmtHours(q.MaxLead))
	}
	return nil
}
