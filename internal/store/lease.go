package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
)

// Lease is one replica's term as the leader. Its epoch grows by one with
// each new term, so that what a former leader does with its epoch once a
// later term began is refused (a fencing token).
type Lease struct {
	Holder  string
	Epoch   int64
	Expires time.Time // on the store's clock
}

// ErrLeaseLost: the lease of a call's epoch is not current: a later term
// began, or it expired. It is not a conflict: retrying the call with the
// same epoch fails again, and the caller must stop acting as the leader.
var ErrLeaseLost = errors.New("the leader's lease of this epoch is no longer current (it expired, or a later term began): stop acting as the leader")

// Leases is the leader's lease. Every method is safe for concurrent use,
// from any replica.
//
// Expiry follows the store's clock: PostgreSQL's own (clock_timestamp()
// in each statement), so that replicas whose clocks disagree still agree
// on when a lease ends; the process's wall clock for SQLite, which one
// server uses. Expires is kept to the microsecond, truncated, as the
// outbox's times are.
//
// A lease that is not current never becomes current again: renewing an
// expired one fails, and acquiring after it starts a new term. So a
// refusal of an epoch is final, and the methods of Outbox that take an
// epoch take effect only while its lease is current.
type Leases interface {
	// AcquireLease makes holder the leader for ttl from the store's now
	// when no lease is current (none was taken, or the last one expired
	// or was released); the new term's epoch is one more than the last
	// one's (the first is 1). When holder holds the current lease
	// already, it is renewed with its epoch. ok is false, with the
	// current lease, when another holds it. Of replicas racing, one
	// wins each term. An empty holder or a ttl under a microsecond is
	// ErrInvalidArgument.
	AcquireLease(ctx context.Context, holder string, ttl time.Duration) (l Lease, ok bool, err error)
	// RenewLease extends the current lease of holder and epoch to ttl
	// from the store's now; ErrLeaseLost when it is not current.
	RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the current lease of holder and epoch at once,
	// so that another replica may lead without waiting for it to
	// expire; one not current is left as it is, without an error.
	ReleaseLease(ctx context.Context, holder string, epoch int64) error
}

// LeaderLease is the name of the leader's lease: the one row of the
// drivers' leases table.
const LeaderLease = "leader"

// CheckLeaseRequest refuses a holder or a ttl that no lease can have.
func CheckLeaseRequest(holder string, ttl time.Duration) error {
	switch {
	case holder == "":
		return core.Invalidf("a lease needs a holder")
	case ttl < time.Microsecond:
		return core.Invalidf("a lease needs a ttl of at least a microsecond, not %s", ttl)
	}
	return nil
}

// LeaseLost is the error of a call made with an epoch whose lease is not
// current; what says what the call was doing.
func LeaseLost(what string, epoch int64) error {
	return fmt.Errorf("%s under epoch %d: %w", what, epoch, ErrLeaseLost)
}
