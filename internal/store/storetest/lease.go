package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// leaseTests check the leader's lease (store.Leases): terms, their
// epochs, expiry on the store's clock, release, and replicas racing.
var leaseTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"LeaseAcquire", testLeaseAcquire},
	{"LeaseRenew", testLeaseRenew},
	{"LeaseExpires", testLeaseExpires},
	{"LeaseRelease", testLeaseRelease},
	{"LeaseInvalid", testLeaseInvalid},
	{"LeaseConcurrent", testLeaseConcurrent},
	{"LeaseReopen", testLeaseReopen},
}

// longTTL is a lease that outlives its test; shortTTL one that the test
// outlives, by waiting outlive.
const (
	longTTL  = time.Hour
	shortTTL = 300 * time.Millisecond
	outlive  = shortTTL + 200*time.Millisecond
)

// acquire makes holder the leader of s for ttl, or fails the test.
func acquire(t *testing.T, s store.Full, holder string, ttl time.Duration) store.Lease {
	t.Helper()
	l, ok, err := s.AcquireLease(t.Context(), holder, ttl)
	mustDo(t, "AcquireLease("+holder+")", err)
	if !ok {
		t.Fatalf("AcquireLease(%s): %s holds the lease of epoch %d until %s", holder, l.Holder, l.Epoch, l.Expires.Format(time.RFC3339Nano))
	}
	if l.Holder != holder {
		t.Fatalf("AcquireLease(%s) = a lease of %s", holder, l.Holder)
	}
	return l
}

// wantAcquired fails the test unless holder acquires a lease of epoch.
func wantAcquired(t *testing.T, s store.Full, holder string, ttl time.Duration, epoch int64) store.Lease {
	t.Helper()
	l := acquire(t, s, holder, ttl)
	if l.Epoch != epoch {
		t.Fatalf("AcquireLease(%s) took epoch %d, want %d", holder, l.Epoch, epoch)
	}
	return l
}

// wantHeldBy fails the test unless holder fails to acquire the lease,
// which another holds under epoch.
func wantHeldBy(t *testing.T, s store.Full, holder, other string, epoch int64) {
	t.Helper()
	l, ok, err := s.AcquireLease(t.Context(), holder, longTTL)
	mustDo(t, "AcquireLease("+holder+")", err)
	if ok || l.Holder != other || l.Epoch != epoch {
		t.Fatalf("AcquireLease(%s) = %+v, ok %v; want it refused, %s holding epoch %d", holder, l, ok, other, epoch)
	}
}

// wantLeaseLost fails the test unless err wraps ErrLeaseLost, and only it.
func wantLeaseLost(t *testing.T, what string, err error) {
	t.Helper()
	wantErr(t, what, err, store.ErrLeaseLost)
	if store.IsConflict(err) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: %v is a conflict or not found too, want a lost lease only", what, err)
	}
}

// wantExpires fails the test unless l expires ttl after a time between
// before and after, give or take a second of the store's clock against
// this process's.
func wantExpires(t *testing.T, l store.Lease, before, after time.Time, ttl time.Duration) {
	t.Helper()
	const skew = time.Second
	if l.Expires.Before(before.Add(ttl-skew)) || l.Expires.After(after.Add(ttl+skew)) {
		t.Fatalf("lease expires at %s, want %s after a time between %s and %s", l.Expires.Format(time.RFC3339Nano), ttl,
			before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	}
	if l.Expires.Nanosecond()%1000 != 0 {
		t.Fatalf("lease expires at %s, want whole microseconds", l.Expires.Format(time.RFC3339Nano))
	}
}

// testLeaseAcquire: the first term is epoch 1; its holder acquiring
// again renews it with its epoch; another is refused and told who holds
// it.
func testLeaseAcquire(t *testing.T, h Harness) {
	s := h.Open(t)
	before := time.Now()
	first := wantAcquired(t, s, "a", longTTL, 1)
	wantExpires(t, first, before, time.Now(), longTTL)

	again := wantAcquired(t, s, "a", longTTL, 1)
	if again.Expires.Before(first.Expires) {
		t.Fatalf("acquiring again moved the expiry back from %s to %s", first.Expires, again.Expires)
	}
	wantHeldBy(t, s, "b", "a", 1)
}

func testLeaseRenew(t *testing.T, h Harness) {
	s := h.Open(t)
	first := wantAcquired(t, s, "a", longTTL, 1)
	before := time.Now()
	l, err := s.RenewLease(t.Context(), "a", 1, 2*longTTL)
	mustDo(t, "RenewLease(a, 1)", err)
	if l.Holder != "a" || l.Epoch != 1 {
		t.Fatalf("RenewLease(a, 1) = %+v, want a's lease of epoch 1", l)
	}
	wantExpires(t, l, before, time.Now(), 2*longTTL)
	if !l.Expires.After(first.Expires) {
		t.Fatalf("renewing for longer left the expiry at %s (was %s)", l.Expires, first.Expires)
	}

	_, err = s.RenewLease(t.Context(), "b", 1, longTTL)
	wantLeaseLost(t, "RenewLease by another holder", err)
	_, err = s.RenewLease(t.Context(), "a", 2, longTTL)
	wantLeaseLost(t, "RenewLease of an epoch to come", err)
	_, err = s.RenewLease(t.Context(), "a", 0, longTTL)
	wantLeaseLost(t, "RenewLease of epoch 0", err)
	wantHeldBy(t, s, "b", "a", 1)
}

// testLeaseExpires: an expired lease is not current: it cannot be
// renewed, another takes the next epoch, and so does its own holder.
func testLeaseExpires(t *testing.T, h Harness) {
	s := h.Open(t)
	wantAcquired(t, s, "a", shortTTL, 1)
	time.Sleep(outlive)
	_, err := s.RenewLease(t.Context(), "a", 1, longTTL)
	wantLeaseLost(t, "RenewLease after expiry", err)
	wantAcquired(t, s, "b", longTTL, 2)
	_, err = s.RenewLease(t.Context(), "a", 1, longTTL)
	wantLeaseLost(t, "RenewLease after another's term began", err)
	wantHeldBy(t, s, "a", "b", 2)

	// A holder whose lease expired starts a new term too.
	s = h.Open(t)
	wantAcquired(t, s, "a", shortTTL, 1)
	time.Sleep(outlive)
	wantAcquired(t, s, "a", longTTL, 2)
	_, err = s.RenewLease(t.Context(), "a", 1, longTTL)
	wantLeaseLost(t, "RenewLease of the expired term", err)
}

// testLeaseRelease: a released lease lets another lead at once; a
// release of a lease not current changes nothing.
func testLeaseRelease(t *testing.T, h Harness) {
	s := h.Open(t)
	wantAcquired(t, s, "a", longTTL, 1)
	mustDo(t, "ReleaseLease(a, 1)", s.ReleaseLease(t.Context(), "a", 1))
	wantAcquired(t, s, "b", longTTL, 2)

	mustDo(t, "ReleaseLease(a, 1) again", s.ReleaseLease(t.Context(), "a", 1))
	mustDo(t, "ReleaseLease(a, 2) of b's term", s.ReleaseLease(t.Context(), "a", 2))
	mustDo(t, "ReleaseLease(b, 1) of a's term", s.ReleaseLease(t.Context(), "b", 1))
	wantHeldBy(t, s, "a", "b", 2)
	_, err := s.RenewLease(t.Context(), "b", 2, longTTL)
	mustDo(t, "RenewLease(b, 2) after the others' releases", err)
	_, err = s.RenewLease(t.Context(), "a", 1, longTTL)
	wantLeaseLost(t, "RenewLease of a released term", err)

	// Its holder acquiring after a release starts a new term.
	mustDo(t, "ReleaseLease(b, 2)", s.ReleaseLease(t.Context(), "b", 2))
	wantAcquired(t, s, "b", longTTL, 3)
}

func testLeaseInvalid(t *testing.T, h Harness) {
	s := h.Open(t)
	_, _, err := s.AcquireLease(t.Context(), "", longTTL)
	wantErr(t, "AcquireLease without a holder", err, core.ErrInvalidArgument)
	_, _, err = s.AcquireLease(t.Context(), "a", 0)
	wantErr(t, "AcquireLease for no time", err, core.ErrInvalidArgument)
	_, _, err = s.AcquireLease(t.Context(), "a", -time.Second)
	wantErr(t, "AcquireLease for a negative time", err, core.ErrInvalidArgument)
	wantAcquired(t, s, "a", longTTL, 1) // none of them took a term
	_, err = s.RenewLease(t.Context(), "a", 1, 0)
	wantErr(t, "RenewLease for no time", err, core.ErrInvalidArgument)
}

// testLeaseConcurrent races 8 holders on 4 replicas for the lease, term
// after term: exactly one wins each term, with the next epoch, and every
// other is refused and told of the winner's lease.
func testLeaseConcurrent(t *testing.T, h Harness) {
	const replicas, holders, terms = 4, 8, 3
	s := h.Open(t)
	stores := []store.Full{s}
	for len(stores) < replicas {
		stores = append(stores, replica(t, h, s))
	}
	for term := int64(1); term <= terms; term++ {
		var (
			wg     sync.WaitGroup
			leases = make([]store.Lease, holders)
			won    = make([]bool, holders)
			errs   = make([]error, holders)
		)
		start := make(chan struct{})
		for i := range holders {
			wg.Go(func() {
				<-start
				leases[i], won[i], errs[i] = stores[i%replicas].AcquireLease(t.Context(), fmt.Sprintf("h%d", i), longTTL)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range holders {
			mustDo(t, fmt.Sprintf("term %d: AcquireLease(h%d)", term, i), errs[i])
			if won[i] {
				if winner >= 0 {
					t.Fatalf("term %d: both h%d and h%d acquired the lease", term, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("term %d: nobody acquired the lease", term)
		}
		want := leases[winner]
		if want.Holder != fmt.Sprintf("h%d", winner) || want.Epoch != term {
			t.Fatalf("term %d: h%d acquired %+v, want its lease of epoch %d", term, winner, want, term)
		}
		for i := range holders {
			if i != winner && (leases[i].Holder != want.Holder || leases[i].Epoch != want.Epoch) {
				t.Errorf("term %d: h%d was refused with %+v, want the winner's lease %+v", term, i, leases[i], want)
			}
		}
		mustDo(t, "ReleaseLease", s.ReleaseLease(t.Context(), want.Holder, want.Epoch))
	}
}

func testLeaseReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	wantAcquired(t, s, "a", longTTL, 1)
	s = h.Reopen(t, s)
	wantHeldBy(t, s, "b", "a", 1)
	_, err := s.RenewLease(t.Context(), "a", 1, longTTL)
	mustDo(t, "RenewLease after reopening", err)
	mustDo(t, "ReleaseLease", s.ReleaseLease(t.Context(), "a", 1))
	wantAcquired(t, s, "b", longTTL, 2)
}
