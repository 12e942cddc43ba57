package postgres

import (
	"testing"
	"time"

	"capblock/internal/store/pgtest"
)

// TestPausedTransactionLetsTheLeaseGo: a leader stopped in the middle of
// a claim (its transaction holds its lease's row FOR SHARE, and sends
// nothing more) does not keep another replica from taking the lease once
// it expired: PostgreSQL ends the idle transaction, and the lease is
// taken within about idleInTransaction. Before, the other replica's
// every try waited on the row lock and failed, until the paused
// process's connection died.
func TestPausedTransactionLetsTheLeaseGo(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	leader := openTemp(t, dsn)
	other := openTemp(t, dsn)
	ctx := t.Context()
	l, ok, err := leader.AcquireLease(ctx, "leader", time.Second)
	if err != nil || !ok {
		t.Fatalf("AcquireLease: %+v %v %v", l, ok, err)
	}
	// The leader begins a claim and stops in the middle of it.
	tx, err := leader.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // ended by the server
	var one int
	if err := tx.QueryRow(ctx, leaseHeldSQL, l.Epoch).Scan(&one); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		got, ok, err := other.AcquireLease(ctx, "other", time.Minute)
		if err == nil && ok {
			if got.Epoch <= l.Epoch {
				t.Fatalf("the other replica's term %d is not past the paused leader's %d", got.Epoch, l.Epoch)
			}
			t.Logf("the other replica took the lease %v after the leader stopped in its transaction", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the other replica could not take the lease in 30 s: ok %v, err %v", ok, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
