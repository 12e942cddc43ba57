package storetest

import (
	"fmt"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// BenchCommitsAmongBooked is BenchCommits on two nodes whose 16 GPUs
// already hold booked allocations each, all later than every purchase
// measured: the i-th purchase takes both nodes for hour i. It measures
// how the commit's overlap re-check grows with the allocations a GPU
// holds: a check that reads every allocation ending after the new start
// reads all booked ones of each GPU, one that reads the first of them
// reads one.
func BenchCommitsAmongBooked(b *testing.B, s store.Store, booked int, cpuMetric string) {
	base := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	nodes := []string{"node-0000", "node-0001"}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	later := base.Add(1_000_000 * time.Hour) // after every purchase
	var c store.Change
	for k := range booked {
		start := later.Add(time.Duration(k) * time.Hour)
		c.Insert = append(c.Insert, core.Block{
			ID: fmt.Sprintf("cb-booked-%06d", k), Name: "booked", Team: "team-booked",
			InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "zone-1",
			Start: start, End: start.Add(time.Hour), State: core.StateScheduled,
			Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: base.Add(-time.Hour),
			Placements: []core.Placement{{Node: nodes[0], GPUs: all}, {Node: nodes[1], GPUs: all}},
		})
		if len(c.Insert) == 1000 || k == booked-1 {
			if err := s.Commit(b.Context(), c); err != nil {
				b.Fatalf("booking blocks: %v", err)
			}
			c = store.Change{}
		}
	}
	changes := make([]store.Change, b.N)
	for i := range changes {
		ch := PurchaseChange(i)
		blk := &ch.Insert[0]
		blk.Start = base.Add(time.Duration(i) * time.Hour)
		blk.End = blk.Start.Add(time.Hour)
		blk.Placements = []core.Placement{{Node: nodes[0], GPUs: all}, {Node: nodes[1], GPUs: all}}
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
