package postgres

import (
	"fmt"
	"testing"

	"capblock/internal/store/pgtest"
	"capblock/internal/store/storetest"
)

// BenchmarkCommitPurchase measures purchases per second, one committer at
// a time, on the test server (fsync off: it measures the driver's round
// trips and the server's work, not the disk). The CPU time is this
// process's only: the server's is not counted.
func BenchmarkCommitPurchase(b *testing.B) {
	storetest.BenchCommits(b, openTemp(b, pgtest.NewDatabase(b)), "client-cpu-µs/op")
}

// BenchmarkCommitAmongBooked is BenchmarkCommitPurchase on two nodes
// whose GPUs already hold 0, 1,000 or 10,000 later allocations each: the
// overlap check's cost should not grow with them.
func BenchmarkCommitAmongBooked(b *testing.B) {
	for _, booked := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("booked=%d", booked), func(b *testing.B) {
			storetest.BenchCommitsAmongBooked(b, openTemp(b, pgtest.NewDatabase(b)), booked, "client-cpu-µs/op")
		})
	}
}
