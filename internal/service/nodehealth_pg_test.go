package service

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// healthReplica is a service on a shared PostgreSQL database, running
// Run (following the other replicas' commits) until stop.
type healthReplica struct {
	svc  *Service
	stop func()
}

// startHealthReplica starts a replica on dsn and waits until its watch
// of the others' commits listens.
func startHealthReplica(t *testing.T, dsn string) *healthReplica {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	svc := newHealthService(t, st, healthT0)
	_, stopRun := runService(t, svc)
	r := &healthReplica{svc: svc, stop: sync.OnceFunc(func() {
		stopRun()
		st.Close()
	})}
	t.Cleanup(r.stop)
	waitFor(t, 20*time.Second, "the replica's watch to listen", func() bool { return watchListened(t, svc) })
	return r
}

// watchListened reports whether the service's watch has started
// listening (and reloaded what it may have missed before).
func watchListened(t *testing.T, svc *Service) bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(svc.metrics.watchLost)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return len(mfs) == 1 && mfs[0].GetMetric()[0].GetCounter().GetValue() >= 1
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
	}
}

// indexedNodes returns the nodes of a block as the service's index holds
// it.
func indexedNodes(svc *Service, id string) []string {
	svc.mu.RLock()
	defer svc.mu.RUnlock()
	b, ok := svc.index.Block(id)
	if !ok {
		return nil
	}
	return nodeNames(b.Placements)
}

// TestNodeHealthSharedByReplicas: a node failed through one replica is
// unhealthy on the other within a second, with the block it moved;
// after both restart on the same database it is unhealthy on both; a
// recovery through the second replica shows on the first within a
// second.
func TestNodeHealthSharedByReplicas(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	seed, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Commit(t.Context(), store.Change{Insert: []core.Block{healthBlock("cb-1", "h100.8x", "n0", 0, 1, 2, 3, 4, 5, 6, 7)}}); err != nil {
		t.Fatal(err)
	}
	seed.Close()

	// 1. Failed through replica 1, seen by replica 2.
	r1, r2 := startHealthReplica(t, dsn), startHealthReplica(t, dsn)
	rep, err := r1.svc.FailNode(t.Context(), "n0", "drained by ops")
	if err != nil {
		t.Fatal(err)
	}
	want := core.NodeHealth{Node: "n0", Health: core.Unhealthy, Reason: "drained by ops", Since: healthT0, Source: core.HealthFromAdmin}
	if diff := cmp.Diff(want, rep.Record); diff != "" {
		t.Fatalf("record of the failure (-want +got):\n%s", diff)
	}
	moved := indexedNodes(r1.svc, "cb-1")
	if diff := cmp.Diff([]string{"cb-1"}, rep.Replaced); diff != "" || moved[0] == "n0" {
		t.Fatalf("replaced %v (-want +got):\n%s; the block is on %v", rep.Replaced, diff, moved)
	}
	waitFor(t, time.Second, "replica 2 to see n0 failed and its block moved", func() bool {
		return cmp.Equal(want, healthOfNodes(r2.svc)["n0"]) && cmp.Equal(moved, indexedNodes(r2.svc, "cb-1"))
	})
	if free := freeWholeNodes(t, r2.svc); free != 1 {
		t.Errorf("replica 2 has %d whole nodes free, want 1 (n0 failed, the block on another)", free)
	}

	// 2. Both restart on the same database.
	r1.stop()
	r2.stop()
	r1, r2 = startHealthReplica(t, dsn), startHealthReplica(t, dsn)
	for i, r := range []*healthReplica{r1, r2} {
		if diff := cmp.Diff(want, healthOfNodes(r.svc)["n0"]); diff != "" {
			t.Errorf("replica %d after the restart (-want +got):\n%s", i+1, diff)
		}
		if free := freeWholeNodes(t, r.svc); free != 1 {
			t.Errorf("replica %d after the restart has %d whole nodes free, want 1", i+1, free)
		}
	}

	// 3. Recovered through replica 2, seen by replica 1.
	rep, err = r2.svc.RecoverNode(t.Context(), "n0")
	if err != nil {
		t.Fatal(err)
	}
	recovered := core.NodeHealth{Node: "n0", Health: core.Healthy, Since: healthT0, Source: core.HealthFromAdmin}
	if diff := cmp.Diff(recovered, rep.Record); diff != "" {
		t.Fatalf("record of the recovery (-want +got):\n%s", diff)
	}
	waitFor(t, time.Second, "replica 1 to see n0 recovered", func() bool {
		return cmp.Equal(recovered, healthOfNodes(r1.svc)["n0"])
	})
	if free := freeWholeNodes(t, r1.svc); free != 2 {
		t.Errorf("replica 1 has %d whole nodes free after the recovery, want 2", free)
	}
}
