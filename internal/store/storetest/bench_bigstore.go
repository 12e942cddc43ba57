package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// BigStoreNodes is the number of 8-GPU nodes that BookWholeNodes books
// on, named node-00000 to node-09999.
const BigStoreNodes = 10_000

// bigStoreHours is the span of BookWholeNodes' bookings: 8 weeks.
const bigStoreHours = 8 * 7 * 24

// BookWholeNodes commits booked whole-node blocks to s, 2,000 to a
// change: each holds one of BigStoreNodes nodes for 1 to 48 hours at a
// random start within 8 weeks of the suite's reference time (seeded,
// so every call books the same), on a node free for its window.
func BookWholeNodes(tb testing.TB, s store.Store, booked int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(5, uint64(booked)))
	type span struct{ start, end int }
	taken := make([][]span, BigStoreNodes)
	free := func(n int, w span) bool {
		for _, t := range taken[n] {
			if t.start < w.end && w.start < t.end {
				return false
			}
		}
		return true
	}
	var c store.Change
	for i := range booked {
		h := 1 + rng.IntN(48)
		w := span{start: rng.IntN(bigStoreHours - h)}
		w.end = w.start + h
		n := rng.IntN(BigStoreNodes)
		for !free(n, w) {
			n = rng.IntN(BigStoreNodes)
		}
		taken[n] = append(taken[n], w)
		c.Insert = append(c.Insert, core.Block{
			ID: fmt.Sprintf("cb-booked-%06d", i), Name: "booked", Team: fmt.Sprintf("team-%02d", i%50),
			InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "zone-1",
			Start: hour(w.start), End: hour(w.end), State: core.StateScheduled,
			Fee: core.Money{Minor: 9832 * int64(h), Currency: "USD"}, CreatedAt: t0.Add(-time.Hour),
			Placements: []core.Placement{{Node: bigStoreNode(n), GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}},
		})
		if len(c.Insert) == 2000 || i == booked-1 {
			if err := s.Commit(tb.Context(), c); err != nil {
				tb.Fatalf("booking blocks: %v", err)
			}
			c = store.Change{}
		}
	}
}

func bigStoreNode(n int) string { return fmt.Sprintf("node-%05d", n) }

// BenchCommitsOnBigStore is BenchCommits on s after BookWholeNodes: the
// i-th purchase takes one random node (seeded) for an hour after the
// booked 8 weeks, so none conflicts. It measures what a commit costs
// as the database grows, the overlap check aside (each GPU holds about
// as many allocations whatever the store holds).
func BenchCommitsOnBigStore(b *testing.B, s store.Store, cpuMetric string) {
	rng := rand.New(rand.NewPCG(6, 6))
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	changes := make([]store.Change, b.N)
	for i := range changes {
		ch := PurchaseChange(i)
		blk := &ch.Insert[0]
		blk.Count = 1
		blk.Start = hour(bigStoreHours + i)
		blk.End = blk.Start.Add(time.Hour)
		blk.Placements = []core.Placement{{Node: bigStoreNode(rng.IntN(BigStoreNodes)), GPUs: all}}
		ch.Actions[0].NextAt = blk.Start
		changes[i] = ch
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
