package service

import (
	"errors"
	"testing"
	"time"

	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// TestLeadFollowsTheLease: of two replicas on one PostgreSQL database,
// the one holding the leader's lease leads, and the other does not. When
// its term ends behind its back (another holder took a later term, as
// after a pause past the lease's expiry) it stops leading at its next
// renewal, and what it would record under its old epoch is refused. When
// it stops cleanly, it releases the lease and the other leads at once,
// with a greater epoch.
func TestLeadFollowsTheLease(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	a := startHealthReplica(t, dsn)
	waitFor(t, 10*time.Second, "replica a to lead", a.svc.Leading)
	b := startHealthReplica(t, dsn)
	time.Sleep(2 * leadRetry)
	if !a.svc.Leading() || b.svc.Leading() {
		t.Fatalf("leading: a %v, b %v; want a only", a.svc.Leading(), b.svc.Leading())
	}

	// An impostor takes a later term once a's is ended behind its back.
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cur, ok, err := st.AcquireLease(t.Context(), "impostor", time.Minute)
	if err != nil || ok {
		t.Fatalf("an impostor acquired a held lease: %+v %v %v", cur, ok, err)
	}
	if err := st.ReleaseLease(t.Context(), cur.Holder, cur.Epoch); err != nil {
		t.Fatal(err)
	}
	imp, ok, err := st.AcquireLease(t.Context(), "impostor", time.Minute)
	if err != nil || !ok || imp.Epoch != cur.Epoch+1 {
		t.Fatalf("the impostor's term: %+v %v %v, after epoch %d", imp, ok, err, cur.Epoch)
	}
	waitFor(t, 5*time.Second, "replica a to stop leading", func() bool { return !a.svc.Leading() })
	if b.svc.Leading() {
		t.Fatal("b leads while the impostor holds the lease")
	}
	if _, err := st.ClaimActions(t.Context(), cur.Epoch, time.Now(), 10); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("claiming under a's old epoch: %v, want ErrLeaseLost", err)
	}

	// The impostor releases; one of the replicas leads with a later term.
	if err := st.ReleaseLease(t.Context(), "impostor", imp.Epoch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a replica to lead again", func() bool { return a.svc.Leading() || b.svc.Leading() })
	leader, other := a, b
	if b.svc.Leading() {
		leader, other = b, a
	}
	// A clean stop releases the lease: the other leads at once, not
	// after the lease's 6 s.
	leader.stop()
	start := time.Now()
	waitFor(t, 4*time.Second, "the other replica to lead after a clean stop", other.svc.Leading)
	t.Logf("the other replica led %s after the leader stopped", time.Since(start).Round(time.Millisecond))
	got, ok, err := st.AcquireLease(t.Context(), "impostor", time.Minute)
	if err != nil || ok || got.Epoch <= imp.Epoch {
		t.Errorf("the lease after the handover: %+v %v %v; want held, with an epoch past %d", got, ok, err, imp.Epoch)
	}
}
