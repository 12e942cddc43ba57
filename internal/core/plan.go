package core

import (
	"math/bits"
	"sort"
	"time"
)

// Plan targets: what a training plan's capacity is for.
const (
	TargetTrainingJob = "training-job"
	TargetCluster     = "cluster"
)

// ValidTarget reports whether t is a known plan target.
func ValidTarget(t string) bool { return t == TargetTrainingJob || t == TargetCluster }

// MaxPlanSegments is the most segments a plan may have.
const MaxPlanSegments = 4

// DefaultPlanSegments is how many segments a plan search allows when the
// request does not say.
const DefaultPlanSegments = 2

// PlanState is a training plan's state. It is never stored: it is derived
// from the states of the plan's segments when read (PlanStateOf).
type PlanState string

const (
	PlanPending   PlanState = "pending"
	PlanScheduled PlanState = "scheduled"
	PlanActive    PlanState = "active"
	PlanExpired   PlanState = "expired"
	PlanFailed    PlanState = "failed"
	PlanCancelled PlanState = "cancelled"
)

// Plan event types: "plan." and the state entered.
const (
	EventPlanScheduled = "plan.scheduled"
	EventPlanActive    = "plan.active"
	EventPlanExpired   = "plan.expired"
	EventPlanFailed    = "plan.failed"
	EventPlanCancelled = "plan.cancelled"
)

// EventOf is the event that records entering state s.
func (s PlanState) EventOf() string { return "plan." + string(s) }

// Plan is a training plan: one or more blocks of the same instance type,
// count and zone (its segments, in time order, possibly with gaps), bought
// together for a target.
type Plan struct {
	ID        string
	Name      string
	Team      string
	Target    string
	Fee       Money // the upfront fee of all segments, as charged at purchase
	CreatedAt time.Time
	// Segments are the plan's blocks ordered by start; each has PlanID set.
	Segments []Block
}

// SortSegments orders segments by start, then id.
func SortSegments(segments []Block) {
	sort.SliceStable(segments, func(i, j int) bool {
		if !segments[i].Start.Equal(segments[j].Start) {
			return segments[i].Start.Before(segments[j].Start)
		}
		return segments[i].ID < segments[j].ID
	})
}

// PlanStateOf derives a plan's state from its segments' states:
//
//	cancelled  no segment is to come or active, and the cancelled ones
//	           are the last in time (the plan was cancelled, CancelPlan)
//	failed     a segment failed or its payment failed, or a segment was
//	           cancelled while another still runs or comes after it
//	active     a segment is active
//	expired    every segment expired
//	scheduled  some segment is still to come (also between segments)
//	pending    no segment stored yet
//
// segments are in time order (SortSegments).
func PlanStateOf(segments []Block) PlanState {
	if len(segments) == 0 {
		return PlanPending
	}
	active, expired, cancelled := false, 0, 0
	for _, b := range segments {
		switch b.State {
		case StateFailed, StatePaymentFailed:
			return PlanFailed
		case StateCancelled:
			cancelled++
		case StateActive:
			active = true
		case StateExpired:
			expired++
		}
	}
	switch {
	case cancelled > 0 && expired+cancelled == len(segments) && cancelledAreLast(segments):
		return PlanCancelled
	case cancelled > 0:
		return PlanFailed
	case active:
		return PlanActive
	case expired == len(segments):
		return PlanExpired
	}
	return PlanScheduled
}

// cancelledAreLast reports whether no segment ended by expiry follows a
// cancelled one: the plan ran as bought up to where it was cancelled.
func cancelledAreLast(segments []Block) bool {
	seen := false
	for _, b := range segments {
		switch {
		case b.State == StateCancelled:
			seen = true
		case seen:
			return false
		}
	}
	return true
}

// CurrentSegment returns the index of the segment that is active, else of
// the next one to come (scheduled or payment-pending), in time order; -1
// when there is none.
func CurrentSegment(segments []Block) int {
	next := -1
	for i, b := range segments {
		switch b.State {
		case StateActive:
			return i
		case StateScheduled, StatePaymentPending:
			if next < 0 || b.Start.Before(segments[next].Start) {
				next = i
			}
		}
	}
	return next
}

// PlanCapacity counts a plan's instances now, like a block's status.
type PlanCapacity struct {
	// Total is the instances of the current or next segment (0 when the
	// plan has none left).
	Total int
	// Available is the instances usable now: those of the active segment
	// that are not on unhealthy nodes (0 while no segment is active).
	Available int
	// InUse is the instances that jobs run on. Jobs on plans come later:
	// the service fills it in from them (see PlanCapacityOf).
	InUse int
	// Unhealthy is the instances of the current or next segment on
	// unhealthy nodes.
	Unhealthy int
}

// PlanCapacityOf counts the capacity of a plan's current or next segment.
// unhealthy tells whether a node is unhealthy now; gpusPerInstance is the
// plan's instance type's. InUse is left 0 for the caller.
func PlanCapacityOf(segments []Block, gpusPerInstance int, unhealthy func(node string) bool) PlanCapacity {
	i := CurrentSegment(segments)
	if i < 0 {
		return PlanCapacity{}
	}
	b := segments[i]
	c := PlanCapacity{Total: b.Count}
	if gpusPerInstance > 0 {
		for _, pl := range b.Placements {
			if unhealthy(pl.Node) {
				c.Unhealthy += bits.OnesCount64(maskOf(pl.GPUs)) / gpusPerInstance
			}
		}
	}
	c.Unhealthy = min(c.Unhealthy, c.Total)
	if b.State == StateActive {
		c.Available = c.Total - c.Unhealthy
	}
	return c
}

// SegmentChange is one segment entering a state at a time.
type SegmentChange struct {
	BlockID string
	State   BlockState
	At      time.Time
}

// PlanTransition is the plan entering a state, caused by a segment change.
type PlanTransition struct {
	From, To PlanState
	At       time.Time
	BlockID  string
}

// PlanTransitions replays changes (in time order) on a plan's segments as
// they were before them and returns every change of the plan's derived
// state, in order. A change of a block that is not a segment is ignored.
func PlanTransitions(segments []Block, changes []SegmentChange) []PlanTransition {
	cur := append([]Block(nil), segments...)
	state := PlanStateOf(cur)
	var out []PlanTransition
	for _, ch := range changes {
		found := false
		for i := range cur {
			if cur[i].ID == ch.BlockID {
				cur[i].State, found = ch.State, true
			}
		}
		if !found {
			continue
		}
		if next := PlanStateOf(cur); next != state {
			out = append(out, PlanTransition{From: state, To: next, At: ch.At, BlockID: ch.BlockID})
			state = next
		}
	}
	return out
}

// StateAfter is the state a block enters with a lifecycle step's event,
// and false for steps that leave the state as it is (warning, termination).
func StateAfter(event string) (BlockState, bool) {
	switch event {
	case EventBlockActive:
		return StateActive, true
	case EventBlockExpired:
		return StateExpired, true
	case EventBlockCancelled:
		return StateCancelled, true
	}
	return "", false
}
