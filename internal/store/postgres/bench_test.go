package postgres

import (
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
