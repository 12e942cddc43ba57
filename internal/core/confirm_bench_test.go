package core

import (
	"fmt"
	"testing"
)

// BenchmarkConfirm: a purchase's decision on a node that already holds
// 10, 1,000 or 10,000 blocks (one GPU each, an hour each, back to back
// over the months ahead), assumed and confirmed on the index, with its
// occupancy built (as a serving index has it). Confirming must cost what
// the decision touched, not what the node holds.
//
//	go test ./internal/core -run '^$' -bench '^BenchmarkConfirm$' -count 6
func BenchmarkConfirm(b *testing.B) {
	for _, held := range []int{10, 1_000, 10_000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			f := indexFleet()
			var blocks []Block
			for i := range held {
				// Back to back on n1's GPU 0, from hour 1000 on, far from
				// the purchases: an hour each.
				blk := makeBlock(fmt.Sprintf("held-%05d", i)).on("n1", 0).hours(1000+i, 1001+i).obj()
				blk.Version = 1
				blocks = append(blocks, blk)
			}
			ix, err := NewIndex(&f, blocks, indexNow)
			if err != nil {
				b.Fatal(err)
			}
			ix.Warm()
			i := 0
			for b.Loop() {
				i++
				// A new one-GPU block on n1, GPU 1, in the node's busy months.
				h := 1000 + i%held
				blk := makeBlock(fmt.Sprintf("new-%d", i)).on("n1", 1).hours(h, h+1).obj()
				if err := ix.Assume(blk); err != nil {
					b.Fatal(err)
				}
				if !ix.Confirm(blk.ID) {
					b.Fatal("not in flight")
				}
				ix.Remove(blk.ID)
			}
		})
	}
}
