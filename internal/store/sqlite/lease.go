package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"capblock/internal/store"
)

// This file holds the state of 0018_leases: the leader's lease. Its
// clock is the process's wall clock (SQLite serves one server), read at
// each call; its times are unix microseconds, as the outbox's are. Each
// change is one statement on the single writer, so that the check of the
// row and its change are one step.

var _ store.Leases = (*Store)(nil)

// storeNow is the lease's clock, in unix microseconds.
func storeNow() int64 { return unixMicros(time.Now()) }

// leaseColumns are the columns that scanLease reads.
const leaseColumns = `holder, epoch, expires`

func scanLease(r rowScanner) (store.Lease, error) {
	var (
		l       store.Lease
		expires int64
	)
	if err := r.Scan(&l.Holder, &l.Epoch, &expires); err != nil {
		return store.Lease{}, err
	}
	l.Expires = fromMicros(expires)
	return l, nil
}

// acquireLeaseSQL takes the lease for ?1 at now ?2 until ?3 when no lease
// is current, or renews it when ?1 holds the current one. A holder whose
// own lease expired starts a new term, as anyone else would.
const acquireLeaseSQL = `UPDATE leases SET holder = ?1,
		epoch = CASE WHEN holder = ?1 AND expires > ?2 THEN epoch ELSE epoch + 1 END,
		expires = ?3
	WHERE name = '` + store.LeaderLease + `' AND (holder = ?1 OR expires <= ?2)
	RETURNING ` + leaseColumns

// AcquireLease makes holder the leader when no lease is current.
func (s *Store) AcquireLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	what := "acquiring the leader's lease for " + holder
	if err := store.CheckLeaseRequest(holder, ttl); err != nil {
		return store.Lease{}, false, fmt.Errorf("%s: %w", what, err)
	}
	now := storeNow()
	l, err := scanLease(s.w.QueryRowContext(ctx, acquireLeaseSQL, holder, now, now+ttl.Microseconds()))
	if err == nil {
		return l, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, fmt.Errorf("%s: %w", what, err)
	}
	// Another holds it: say who, and until when.
	l, err = scanLease(s.r.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE name = ?`, store.LeaderLease))
	if err != nil {
		return store.Lease{}, false, fmt.Errorf("%s: reading the current lease: %w", what, err)
	}
	return l, false, nil
}

// RenewLease extends the current lease of holder and epoch.
func (s *Store) RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (store.Lease, error) {
	what := "renewing the leader's lease of " + holder
	if err := store.CheckLeaseRequest(holder, ttl); err != nil {
		return store.Lease{}, fmt.Errorf("%s: %w", what, err)
	}
	now := storeNow()
	l, err := scanLease(s.w.QueryRowContext(ctx, `UPDATE leases SET expires = ?4
		WHERE name = ?1 AND holder = ?2 AND epoch = ?3 AND expires > ?5
		RETURNING `+leaseColumns, store.LeaderLease, holder, epoch, now+ttl.Microseconds(), now))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, store.LeaseLost(what, epoch)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("%s under epoch %d: %w", what, epoch, err)
	}
	return l, nil
}

// ReleaseLease ends the current lease of holder and epoch. It ends at 0,
// not at now, so that a wall clock set back does not make it current
// again.
func (s *Store) ReleaseLease(ctx context.Context, holder string, epoch int64) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE leases SET expires = 0
		WHERE name = ? AND holder = ? AND epoch = ? AND expires > ?`, store.LeaderLease, holder, epoch, storeNow()); err != nil {
		return fmt.Errorf("releasing the leader's lease of %s under epoch %d: %w", holder, epoch, err)
	}
	return nil
}

// leaseCurrentSQL finds the lease of epoch ?1 if it is current at ?2.
const leaseCurrentSQL = `SELECT 1 FROM leases WHERE name = '` + store.LeaderLease + `' AND epoch = ?1 AND expires > ?2`

// leaseCurrent reports whether the lease of epoch is current.
func leaseCurrent(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, epoch int64) (bool, error) {
	var one int
	err := db.QueryRowContext(ctx, leaseCurrentSQL, epoch, storeNow()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the leader's lease: %w", err)
	}
	return true, nil
}
