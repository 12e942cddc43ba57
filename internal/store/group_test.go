package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCommitGroup: every request is answered once, by the group that
// took it; no more than Writers groups are written at once; requests
// that arrive while every writer is busy share groups.
func TestCommitGroup(t *testing.T) {
	for _, writers := range []int{1, 3} {
		g := NewCommitGroup[*int](8, writers)
		var inFlight, most atomic.Int64
		answered := make([]int, 400)
		var wg sync.WaitGroup
		for i := range answered {
			wg.Go(func() {
				v := i
				g.Do(&v, func(group []*int) {
					n := inFlight.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					if len(group) > 8 {
						t.Errorf("a group of %d, want at most 8", len(group))
					}
					time.Sleep(100 * time.Microsecond)
					for _, r := range group {
						answered[*r]++
					}
					inFlight.Add(-1)
				})
				if answered[i] != 1 {
					t.Errorf("request %d answered %d times when Do returned, want once", i, answered[i])
				}
			})
		}
		wg.Wait()
		if m := most.Load(); m > int64(writers) {
			t.Errorf("writers=%d: %d groups written at once", writers, m)
		}
		if g.Largest() < 2 {
			t.Errorf("writers=%d: the largest group took %d requests: none shared", writers, g.Largest())
		}
	}
}
