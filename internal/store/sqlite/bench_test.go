package sqlite

import (
	"fmt"
	"os"
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

// BenchmarkCommitOnBigStore is BenchmarkCommitPurchase of one whole node
// on a store holding 0, 10,000 or 100,000 booked whole-node blocks on
// 10,000 nodes. Each is booked once into a template file; each run
// commits to a copy of it.
func BenchmarkCommitOnBigStore(b *testing.B) {
	dir := b.TempDir()
	for _, booked := range []int{0, 10_000, 100_000} {
		tmpl := filepath.Join(dir, fmt.Sprintf("booked-%d.db", booked))
		b.Run(fmt.Sprintf("booked=%d", booked), func(b *testing.B) {
			if _, err := os.Stat(tmpl); err != nil {
				st := openTemp(b, tmpl)
				storetest.BookWholeNodes(b, st, booked)
				if err := st.Close(); err != nil { // the file holds it all
					b.Fatal(err)
				}
			}
			path := filepath.Join(b.TempDir(), "bench.db")
			data, err := os.ReadFile(tmpl)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
			storetest.BenchCommitsOnBigStore(b, openTemp(b, path), "cpu-µs/op")
		})
	}
}
