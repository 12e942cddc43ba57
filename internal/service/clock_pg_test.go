package service

import (
	"testing"
	"time"

	"capblock/internal/store/pgtest"
)

// TestClockSharedByReplicas: the simulated clock moved through one
// replica is the time of every replica (DESIGN.md, invariant 9), the
// follower's and the leader's alike, within the notice's way. Before,
// each replica kept its own: a quote refused as expired on one was
// bought on another.
func TestClockSharedByReplicas(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	a := startHealthReplica(t, dsn)
	waitFor(t, 10*time.Second, "replica a to lead", a.svc.Leading)
	b := startHealthReplica(t, dsn)
	for i, move := range []struct {
		through *healthReplica
		d       time.Duration
	}{{a, 2 * time.Hour}, {b, 90 * time.Minute}, {a, time.Hour}} {
		want, err := move.through.svc.SimClock().Advance(move.d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*healthReplica{a, b} {
			waitFor(t, 5*time.Second, "every replica to show the time moved through one", func() bool {
				return r.svc.Now().Equal(want)
			})
		}
		t.Logf("move %d: both replicas at %s", i+1, want.Format(time.RFC3339))
	}
	if got, want := b.svc.Now(), healthT0.Add(4*time.Hour+30*time.Minute); !got.Equal(want) {
		t.Fatalf("after three moves the clock is at %s, want %s", got, want)
	}
}
