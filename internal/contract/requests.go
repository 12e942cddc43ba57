package contract

import (
	"time"

	"capblock/internal/core"
)

// PurchaseRequest buys a block offering (POST /v1/blocks in the REST API).
// Team is the team the block is for, resolved with TeamFor.
type PurchaseRequest struct {
	Team        string
	OfferingID  string
	ClientToken string
	Name        string
	Tags        map[string]string
}

// PlanPurchaseRequest buys a plan offering (POST /v1/plans in the REST
// API). Team is the team the plan is for, resolved with TeamFor.
type PlanPurchaseRequest struct {
	Team        string
	OfferingID  string
	ClientToken string
	Name        string
}

// JobRequest starts a job on a block's or a plan's GPUs (POST /v1/jobs
// in the REST API).
type JobRequest struct {
	Name          string
	BlockID       string
	PlanID        string
	Command       []string
	Env           map[string]string
	InstanceCount int
	MaxRestarts   int
	// Preemptible runs the job on backfill, on no block: InstanceCount
	// instances of InstanceType in Zone ("" for any), for Team (an
	// admin's caller names it; a member's is their own), at the spot
	// price per GPU-hour used.
	Preemptible  bool
	InstanceType string
	Zone         string
	Team         string
}

// SimClock is a clock that an admin call moves.
type SimClock interface {
	Now() time.Time
	Advance(d time.Duration) (time.Time, error)
	Set(t time.Time) (time.Time, error)
}

// ClockRequest moves the simulated clock: to Set when it is not zero,
// else forward by Advance.
type ClockRequest struct {
	Set     time.Time
	Advance time.Duration
}

// Apply moves c as r says, and returns the time it then shows.
func (r ClockRequest) Apply(c SimClock) (time.Time, error) {
	if !r.Set.IsZero() {
		return c.Set(r.Set)
	}
	return c.Advance(r.Advance)
}

// TransferRequest hands a block's hours on to another team: the whole
// block before its start, else the rest from the next whole hour. Scope
// is the caller's (see Service). Price, when above zero, is charged to
// the receiving team and credited to the holder.
type TransferRequest struct {
	Scope   string
	BlockID string
	ToTeam  string
	Price   core.Money
}
