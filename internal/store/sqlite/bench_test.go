package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"

	"capblock/internal/store/storetest"
)

// BenchmarkCommitPurchase measures durable purchases per second, one
// committer at a time (every commit waits for its fsync). CPU time is
// steadier than wall time on a shared machine.
func BenchmarkCommitPurchase(b *testing.B) {
	storetest.BenchCommits(b, openTemp(b, filepath.Join(b.TempDir(), "bench.db")), "cpu-µs/op")
}

// BenchmarkCommitAmongBooked is BenchmarkCommitPurchase on two nodes
// whose GPUs already hold 0, 1,000 or 10,000 later allocations each: the
// overlap re-check's cost should not grow with them.
func BenchmarkCommitAmongBooked(b *testing.B) {
	for _, booked := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("booked=%d", booked), func(b *testing.B) {
			storetest.BenchCommitsAmongBooked(b, openTemp(b, filepath.Join(b.TempDir(), "bench.db")), booked, "cpu-µs/op")
		})
	}
}
