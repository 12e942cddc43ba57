package core

import (
	"fmt"
	"time"
)

// Block event types.
const (
	EventBlockPurchased         = "block.purchased"
	EventBlockScheduled         = "block.scheduled"
	EventBlockActive            = "block.active"
	EventBlockExpirationWarning = "block.expiration-warning"
	EventBlockTerminating       = "block.terminating"
	EventBlockExpired           = "block.expired"
	EventBlockCancelled         = "block.cancelled"
	EventBlockExtended          = "block.extended"
	EventBlockMoved             = "block.moved"
	EventBlockPaymentPending    = "block.payment-pending"
	EventBlockApproved          = "block.approved"
	EventBlockPaymentFailed     = "block.payment-failed"
)

// NeedsApproval reports whether a block of count instances waits for an
// admin's approval under the operator's policy.
func NeedsApproval(count int, l Limits) bool {
	return l.ApprovalAboveInstances > 0 && count > l.ApprovalAboveInstances
}

// Approve moves a block waiting for approval to scheduled.
func Approve(b Block) (Block, error) {
	if b.State != StatePaymentPending {
		return b, fmt.Errorf("%w: block %s is %s; only payment-pending blocks wait for approval", ErrInvalidState, b.ID, b.State)
	}
	b.State = StateScheduled
	return b, nil
}

// Transition is one lifecycle step the reconciler takes, with its event.
type Transition struct {
	Event string
	At    time.Time // when it was due
}

// Advance moves a block through every lifecycle step due at now, in order:
// scheduled → active at start, the expiration warning at end − WarnBefore,
// termination from end − TerminateBefore (the block stays active; its
// workloads are stopped), expired at end. It returns the new block and the
// steps taken; the block is unchanged when nothing is due.
func Advance(b Block, now time.Time, l Limits) (Block, []Transition) {
	var steps []Transition
	for {
		next, t, ok := step(b, now, l)
		if !ok {
			return b, steps
		}
		b = next
		steps = append(steps, t)
	}
}

// step is the block state machine: one due step, if any.
func step(b Block, now time.Time, l Limits) (Block, Transition, bool) {
	warnAt := b.End.Add(-l.WarnBefore)
	termAt := b.End.Add(-l.TerminateBefore)
	switch b.State {
	case StatePaymentPending:
		if failAt := b.Start.Add(-l.ApprovalDeadline); !now.Before(failAt) {
			b.State = StatePaymentFailed
			return b, Transition{EventBlockPaymentFailed, failAt}, true
		}
	case StateScheduled:
		if !now.Before(b.Start) {
			b.State = StateActive
			return b, Transition{EventBlockActive, b.Start}, true
		}
	case StateActive:
		switch {
		case !b.Warned && !now.Before(warnAt):
			b.Warned = true
			return b, Transition{EventBlockExpirationWarning, warnAt}, true
		case !b.Terminating && !now.Before(termAt):
			b.Terminating = true
			return b, Transition{EventBlockTerminating, termAt}, true
		case !now.Before(b.End):
			b.State = StateExpired
			return b, Transition{EventBlockExpired, b.End}, true
		}
	}
	return b, Transition{}, false
}

// NextDue returns when the block's next lifecycle step is due, and false
// when it has none.
func NextDue(b Block, l Limits) (time.Time, bool) {
	switch b.State {
	case StatePaymentPending:
		return b.Start.Add(-l.ApprovalDeadline), true
	case StateScheduled:
		return b.Start, true
	case StateActive:
		switch {
		case !b.Warned:
			return b.End.Add(-l.WarnBefore), true
		case !b.Terminating:
			return b.End.Add(-l.TerminateBefore), true
		default:
			return b.End, true
		}
	}
	return time.Time{}, false
}

// RefundBasis is what a cancellation of a block may refund its team: Paid,
// what the team paid for the block's hours and has not had back (at most
// what the block's escrow still holds), and Start, the start of the hours
// as first bought, by which the policy tells before from after the start
// (hours handed on keep the start of the block they came from).
type RefundBasis struct {
	Paid  Money
	Start time.Time
}

// PaidBasis is the basis of a block its team bought itself, none of it
// refunded yet: its fee, from its start.
func PaidBasis(b Block) RefundBasis { return RefundBasis{Paid: b.Fee, Start: b.Start} }

// Cancel decides a cancellation at now: the cancelled block and the refund
// owed under the operator's policy (RefundBeforeStart percent of what the
// team paid before the start, RefundAfterStart percent after it).
func Cancel(b Block, now time.Time, l Limits, basis RefundBasis) (Block, Money, error) {
	if !b.State.Live() {
		return b, Money{}, fmt.Errorf("%w: block %s is %s; only payment-pending, scheduled or active blocks can be cancelled", ErrInvalidState, b.ID, b.State)
	}
	pct := l.RefundBeforeStart
	if !now.Before(basis.Start) {
		pct = l.RefundAfterStart
	}
	refund := Money{Minor: max(basis.Paid.Minor, 0) * int64(pct) / 100, Currency: b.Fee.Currency}
	b.State = StateCancelled
	return b, refund, nil
}

// CheckExtension tells whether a block may be extended at now by d: it
// must be scheduled or active, now must be between ExtendFrom and
// ExtendUntil before its end, and d whole hours within the duration limit.
func CheckExtension(b Block, d time.Duration, now time.Time, l Limits) error {
	if b.State != StateScheduled && b.State != StateActive {
		return fmt.Errorf("%w: block %s is %s; only scheduled or active blocks can be extended", ErrInvalidState, b.ID, b.State)
	}
	if d < time.Hour || d%time.Hour != 0 {
		return Invalidf("extension duration %s must be a whole number of hours, at least 1h", d)
	}
	if total := b.End.Add(d).Sub(b.Start); total > l.MaxDuration {
		return Invalidf("extended block would last %s, above the limit of %s", fmtHours(total), fmtHours(l.MaxDuration))
	}
	opens, closes := b.End.Add(-l.ExtendFrom), b.End.Add(-l.ExtendUntil)
	if now.Before(opens) {
		return fmt.Errorf("%w: extensions of block %s open at %s (%s before its end)", ErrInvalidState, b.ID, opens.Format(time.RFC3339), fmtHours(l.ExtendFrom))
	}
	if now.After(closes) {
		return fmt.Errorf("%w: extensions of block %s closed at %s (%s before its end)", ErrInvalidState, b.ID, closes.Format(time.RFC3339), fmtHours(l.ExtendUntil))
	}
	return nil
}
