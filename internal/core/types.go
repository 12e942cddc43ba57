// Package core is capblock's pure decision layer: the fleet model, the
// availability index, placement, offering search, pricing and the block
// lifecycle. It performs no I/O and never reads the clock: every decision
// takes a snapshot, a request and "now", and returns a result with reasons.
package core

import (
	"errors"
	"fmt"
	"time"
)

// Domain outcomes. Callers wrap them with %w and detail; the API maps each
// to a stable problem code.
var (
	ErrInvalidArgument     = errors.New("invalid argument")
	ErrNotFound            = errors.New("not found")
	ErrConflict            = errors.New("conflict")
	ErrNoCapacity          = errors.New("no capacity")
	ErrOfferingExpired     = errors.New("offering expired")
	ErrOfferingInvalid     = errors.New("offering invalid")
	ErrIdempotencyMismatch = errors.New("client token reused with other parameters")
	ErrInvalidState        = errors.New("invalid state")
)

// Invalidf returns an ErrInvalidArgument with a message for the user.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Money is an amount in integer minor units (cents) of a currency.
type Money struct {
	Minor    int64
	Currency string
}

// String renders the amount as a decimal string, e.g. "1234.56".
func (m Money) String() string {
	sign := ""
	v := m.Minor
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// InstanceType is what is sold: gpusPerInstance GPUs of one model on one node.
type InstanceType struct {
	Name            string
	GPUModel        string
	GPUsPerInstance int
	// OnDemand is the price of one instance for one hour.
	OnDemand Money
	// AWSNames are the names AWS requests may give the type (p5.48xlarge,
	// ml.p5.48xlarge); the AWS protocols answer with the first without
	// the "ml." prefix for EC2, with it for SageMaker.
	AWSNames []string
}

// Health of a node.
type Health string

const (
	Healthy   Health = "healthy"
	Unhealthy Health = "unhealthy"
)

// Node is one host with GPUs identical GPUs of one model.
type Node struct {
	Name     string
	Zone     string
	Rack     string
	GPUModel string
	GPUs     int
	Labels   map[string]string
	Health   Health
}

// Limits are the operator's configurable bounds on what can be bought.
type Limits struct {
	MaxInstancesPerBlock int
	MinDuration          time.Duration
	MaxDuration          time.Duration
	MinLeadTime          time.Duration // earliest start from now ("as soon as 30 minutes")
	MaxLeadTime          time.Duration // latest start from now (8 weeks)
	Horizon              time.Duration // how far the index looks ahead (26 weeks)
	OfferingTTL          time.Duration
	LockIn               time.Duration // placements final this long before start
	WarnBefore           time.Duration // expiration warning before end
	TerminateBefore      time.Duration // workloads stopped from this long before end
	ExtendFrom           time.Duration // extension offered from this long before end...
	ExtendUntil          time.Duration // ...down to this long before end
	RefundBeforeStart    int           // percent refunded when cancelled before start
	RefundAfterStart     int           // percent refunded when released after start
	MaxResults           int
	// ApprovalAboveInstances, when above 0, makes a block of more
	// instances wait in payment-pending for an admin's approval; one still
	// unapproved ApprovalDeadline before its start becomes payment-failed.
	ApprovalAboveInstances int
	ApprovalDeadline       time.Duration
	// Transfers says who may hand a block's hours on to another team:
	// TransfersNone, TransfersAdmin (an admin does it; the default) or
	// TransfersAny (a member of the holding team).
	Transfers string
	// ResaleFeePercent is the share of resold hours kept by the operator
	// when a block released for resale is bought again.
	ResaleFeePercent int
	// BackfillNotice is how long before its GPUs are needed (a block's
	// start, a lending holder's job) preemptible work gets SIGTERM; it is
	// gone by then.
	BackfillNotice time.Duration
	// LendCreditPercent is the share of the spot price earned on a lent
	// block's GPUs that is credited to its holder.
	LendCreditPercent int
	// BudgetCountsCredits lets a team's credits (income from others: a
	// transfer's price, a resale, lending) make room under its budget. Off
	// by default: a budget caps what the team spends itself.
	BudgetCountsCredits bool
}

// Transfer policies (Limits.Transfers).
const (
	TransfersNone  = "none"
	TransfersAdmin = "admin"
	TransfersAny   = "any"
)

// DefaultLimits are the baseline semantics of DESIGN.md.
func DefaultLimits() Limits {
	return Limits{
		MaxInstancesPerBlock: 64,
		MinDuration:          time.Hour,
		MaxDuration:          182 * 24 * time.Hour,
		MinLeadTime:          30 * time.Minute,
		MaxLeadTime:          8 * 7 * 24 * time.Hour,
		Horizon:              26 * 7 * 24 * time.Hour,
		OfferingTTL:          10 * time.Minute,
		LockIn:               time.Hour,
		WarnBefore:           40 * time.Minute,
		TerminateBefore:      30 * time.Minute,
		ExtendFrom:           56 * 24 * time.Hour,
		ExtendUntil:          time.Hour,
		RefundBeforeStart:    100,
		RefundAfterStart:     0,
		MaxResults:           6,
		ApprovalDeadline:     5 * time.Minute,
		Transfers:            TransfersAdmin,
		ResaleFeePercent:     10,
		BackfillNotice:       10 * time.Minute,
		LendCreditPercent:    50,
	}
}

// Fleet is the declared or discovered set of nodes and what is sold on them.
type Fleet struct {
	Nodes    []Node
	Types    []InstanceType
	Currency string
	Limits   Limits
	Pricing  Pricing
}

// Type returns the instance type with the given name.
func (f *Fleet) Type(name string) (InstanceType, bool) {
	for _, t := range f.Types {
		if t.Name == name {
			return t, true
		}
	}
	return InstanceType{}, false
}

// Zones returns the zones that hold nodes of the given GPU model, sorted.
func (f *Fleet) Zones(gpuModel string) []string {
	seen := map[string]bool{}
	var zones []string
	for _, n := range f.Nodes {
		if n.GPUModel == gpuModel && !seen[n.Zone] {
			seen[n.Zone] = true
			zones = append(zones, n.Zone)
		}
	}
	sortStrings(zones)
	return zones
}

// BlockState is a capacity block's lifecycle state.
type BlockState string

const (
	StatePaymentPending BlockState = "payment-pending"
	StateScheduled      BlockState = "scheduled"
	StateActive         BlockState = "active"
	StateExpired        BlockState = "expired"
	StatePaymentFailed  BlockState = "payment-failed"
	StateCancelled      BlockState = "cancelled"
	StateFailed         BlockState = "failed"
)

// Live reports whether a block in this state holds capacity.
func (s BlockState) Live() bool {
	return s == StatePaymentPending || s == StateScheduled || s == StateActive
}

// Valid reports whether s is a known state.
func (s BlockState) Valid() bool {
	switch s {
	case StatePaymentPending, StateScheduled, StateActive, StateExpired,
		StatePaymentFailed, StateCancelled, StateFailed:
		return true
	}
	return false
}

// Placement is the GPUs of one node that a block holds.
type Placement struct {
	Node string
	GPUs []int
}

// Block is a purchased reservation of Count instances from Start to End.
type Block struct {
	ID           string
	Name         string
	Team         string
	InstanceType string
	GPUModel     string
	Count        int
	Zone         string
	Start        time.Time
	End          time.Time
	State        BlockState
	Fee          Money
	CreatedAt    time.Time
	Tags         map[string]string
	Placements   []Placement
	// Warned and Terminating record the lifecycle marks of an active block.
	Warned      bool
	Terminating bool
	// Lending: the holder lends the block's GPUs to backfill while it
	// runs no job on them (see backfill.go).
	Lending bool
	// PlanID is the training plan the block is a segment of, if any.
	PlanID string
	// Version increases with every stored change; commits check it.
	Version int64
	// Trace is the W3C trace context of the decision that bought the
	// block ("" when it was not traced): its activation, decided at its
	// start, continues that trace.
	Trace string
}

// DurationHours is the block's length in whole hours.
func (b *Block) DurationHours() int { return int(b.End.Sub(b.Start) / time.Hour) }

// LockInTime is when the block's placement becomes final.
func (b *Block) LockInTime(l Limits) time.Time { return b.Start.Add(-l.LockIn) }

// Movable reports whether the block's placement is still tentative at now.
func (b *Block) Movable(now time.Time, l Limits) bool {
	return b.State.Live() && b.State != StateActive && now.Before(b.LockInTime(l))
}

// Event records one state change of a block, plan or job.
type Event struct {
	ID      string
	Seq     int64
	Time    time.Time
	Type    string
	Subject string
	Team    string
	Data    map[string]any
}

// LedgerEntry is one line of a team's ledger: a journal's posting on
// its wallet (Journal.Entries).
type LedgerEntry struct {
	ID      string
	Journal string
	Seq     int64 // the journal's order
	Team    string
	Time    time.Time
	Kind    string // "charge", "refund" or "credit"
	Amount  Money
	Subject string
	// InstanceType and OnDemand say what the entry paid for: the type, and
	// what the same instance-hours cost on demand (for savings reports).
	InstanceType string
	OnDemand     Money
}

// Ledger entry kinds.
const (
	LedgerCharge = "charge"
	LedgerRefund = "refund"
	LedgerCredit = "credit"
)
