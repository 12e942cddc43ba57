package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store"
)

// This file holds the state of 0018_leases: the leader's lease. Its
// clock is the database's (clock_timestamp(), read when each statement
// evaluates it, after any wait for a lock), so that replicas whose clocks
// disagree agree on expiry. Each change is one UPDATE of the lease's row:
// of replicas racing, each waits for the row lock of the one before, then
// re-checks the row as that one left it.

var _ store.Leases = (*Store)(nil)

// leaseColumns are the columns that scanLease reads.
const leaseColumns = `holder, epoch, expires`

func scanLease(r rowScanner) (store.Lease, error) {
	var l store.Lease
	if err := r.Scan(&l.Holder, &l.Epoch, &l.Expires); err != nil {
		return store.Lease{}, err
	}
	l.Expires = l.Expires.UTC()
	return l, nil
}

// acquireLeaseSQL takes the lease $1 for $2 for $3 microseconds when no
// lease is current, or renews it when $2 holds the current one. A holder
// whose own lease expired starts a new term, as anyone else would.
const acquireLeaseSQL = `UPDATE leases SET holder = $2,
		epoch = CASE WHEN holder = $2 AND expires > clock_timestamp() THEN epoch ELSE epoch + 1 END,
		expires = clock_timestamp() + $3::bigint * interval '1 microsecond'
	WHERE name = $1 AND (holder = $2 OR expires <= clock_timestamp())
	RETURNING ` + leaseColumns

// AcquireLease makes holder the leader when no lease is current.
func (s *Store) AcquireLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	what := "acquiring the leader's lease for " + holder
	if err := store.CheckLeaseRequest(holder, ttl); err != nil {
		return store.Lease{}, false, fmt.Errorf("%s: %w", what, err)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, acquireLeaseSQL, store.LeaderLease, holder, ttl.Microseconds()))
	if err == nil {
		return l, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, false, dbError(what, err)
	}
	// Another holds it: say who, and until when.
	l, err = scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM leases WHERE name = $1`, store.LeaderLease))
	if err != nil {
		return store.Lease{}, false, dbError(what+": reading the current lease", err)
	}
	return l, false, nil
}

// RenewLease extends the current lease of holder and epoch.
func (s *Store) RenewLease(ctx context.Context, holder string, epoch int64, ttl time.Duration) (store.Lease, error) {
	what := "renewing the leader's lease of " + holder
	if err := store.CheckLeaseRequest(holder, ttl); err != nil {
		return store.Lease{}, fmt.Errorf("%s: %w", what, err)
	}
	l, err := scanLease(s.pool.QueryRow(ctx, `UPDATE leases
		SET expires = clock_timestamp() + $4::bigint * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires > clock_timestamp()
		RETURNING `+leaseColumns, store.LeaderLease, holder, epoch, ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, store.LeaseLost(what, epoch)
	}
	if err != nil {
		return store.Lease{}, dbError(what, err)
	}
	return l, nil
}

// ReleaseLease ends the current lease of holder and epoch. It ends in
// 1970, not at now, so that a clock set back does not make it current
// again.
func (s *Store) ReleaseLease(ctx context.Context, holder string, epoch int64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE leases SET expires = to_timestamp(0)
		WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires > clock_timestamp()`,
		store.LeaderLease, holder, epoch); err != nil {
		return dbError("releasing the leader's lease of "+holder, err)
	}
	return nil
}

// leaseCurrent reports whether the lease of epoch is current.
func (s *Store) leaseCurrent(ctx context.Context, epoch int64) (bool, error) {
	var current bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM leases
		WHERE name = $1 AND epoch = $2 AND expires > clock_timestamp())`, store.LeaderLease, epoch).Scan(&current); err != nil {
		return false, dbError("reading the leader's lease", err)
	}
	return current, nil
}
