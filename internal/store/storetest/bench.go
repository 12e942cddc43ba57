package storetest

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// PurchaseChange is the change of the i-th purchase of two whole 8-GPU
// nodes, for the drivers' commit benchmarks. Purchases go round a fleet
// of 1,000 nodes, each round 4 hours later, so none conflicts and the
// nodes fill up over time as in a real fleet. Each uses an offering of
// its own, as a real purchase does, and stores the engine action that
// activates its block.
func PurchaseChange(i int) store.Change {
	const nodePairs = 500
	base := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	pair, round := i%nodePairs, i/nodePairs
	start := base.Add(time.Duration(4*round) * time.Hour)
	now := base.Add(-time.Hour)
	id := fmt.Sprintf("cb-%08d", i)
	team := fmt.Sprintf("team-%d", i%20)
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	fee := core.Money{Minor: 2 * 4 * 9800, Currency: "USD"}
	off := core.Offering{Kind: core.KindBlock, InstanceType: "h100.8x", Count: 2, Zone: "zone-1",
		Start: start, End: start.Add(4 * time.Hour), Fee: fee, OnDemandFee: fee, ExpiresAt: now.Add(10 * time.Minute),
		BlockID: id} // the block id only makes every offering distinct
	off.Sign(offeringSecret)
	return store.Change{
		Insert: []core.Block{{
			ID: id, Name: "bench", Team: team, InstanceType: "h100.8x", GPUModel: "H100",
			Count: 2, Zone: "zone-1", Start: start, End: start.Add(4 * time.Hour),
			State: core.StatePaymentPending, Fee: fee, CreatedAt: now,
			Tags: map[string]string{"purpose": "bench"},
			Placements: []core.Placement{
				{Node: fmt.Sprintf("node-%04d", 2*pair), GPUs: all},
				{Node: fmt.Sprintf("node-%04d", 2*pair+1), GPUs: all},
			},
		}},
		Idempotency: []store.IdempotencyRecord{{Team: team, ClientToken: "tok-" + id, RequestHash: "sha256:" + id, Subject: id, CreatedAt: now}},
		Journals:    []core.Journal{charge("led-"+id, team, now, fee, id)},
		Events: []core.Event{
			{ID: "ev-" + id + "-1", Time: now, Type: "block.created", Subject: id, Team: team, Data: map[string]any{"fee": fee.String(), "count": 2}},
			{ID: "ev-" + id + "-2", Time: now, Type: "ledger.charged", Subject: id, Team: team, Data: map[string]any{"amount": fee.String()}},
		},
		Offerings: []string{off.ID},
		Actions: []core.Action{{ID: "act-" + id, Kind: core.ActionActivate, Subject: id, Team: team,
			Payload: []byte(fmt.Sprintf(`{"block":%q,"nodes":["node-%04d","node-%04d"]}`, id, 2*pair, 2*pair+1)),
			NextAt:  start, CreatedAt: now}},
	}
}

// BenchCommits commits b.N purchases (PurchaseChange) to s one after
// another and reports purchases per second and this process's CPU time
// per purchase, under the metric name cpuMetric.
func BenchCommits(b *testing.B, s store.Store, cpuMetric string) {
	changes := make([]store.Change, b.N)
	for i := range changes {
		changes[i] = PurchaseChange(i)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Commit(b.Context(), changes[i]); err != nil {
			b.Fatalf("Commit of purchase %d: %v", i, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), cpuMetric)
}

// cpuTime is the user and system time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
