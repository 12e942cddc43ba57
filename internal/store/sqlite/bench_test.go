package sqlite

import (
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
