package core

import (
	"fmt"
	"testing"
	"time"
)

// dueIndex is an index of n/10 8-GPU nodes holding n blocks, ten per
// node one after another from an hour after benchNow, each 1 to 3 days,
// whole nodes and single GPUs in turn, and on 2 more nodes 10 blocks of
// one GPU that start at benchNow: their activation is due, nothing else
// is.
func dueIndex(b *testing.B, n int) *Index {
	b.Helper()
	nodes := n / 10
	f := Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing(), Types: []InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: Money{Minor: 9832, Currency: "USD"}},
		{Name: "h100.1x", GPUModel: "H100", GPUsPerInstance: 1, OnDemand: Money{Minor: 1229, Currency: "USD"}},
	}}
	for i := range nodes + 2 {
		f.Nodes = append(f.Nodes, Node{Name: fmt.Sprintf("n%06d", i), Zone: fmt.Sprintf("zone-%d", i%4),
			Rack: fmt.Sprintf("r%05d", i/50), GPUModel: "H100", GPUs: 8, Health: Healthy})
	}
	var blocks []Block
	for i := range nodes {
		start := benchNow.Add(time.Hour)
		for k := range 10 {
			end := start.Add(time.Duration(24+(i*7+k*13)%48) * time.Hour)
			bl := Block{ID: fmt.Sprintf("b%06d-%d", i, k), Team: fmt.Sprintf("t%d", (i+k)%50), State: StateScheduled,
				InstanceType: "h100.8x", Count: 1, Start: start, End: end, Placements: []Placement{wholeNode(f.Nodes[i].Name)}}
			if k%2 == 1 {
				bl.InstanceType, bl.Placements[0].GPUs = "h100.1x", []int{i % 8}
			}
			blocks = append(blocks, bl)
			start = end.Add(time.Hour)
		}
	}
	for d := range 10 {
		spare := f.Nodes[nodes+d/8].Name
		blocks = append(blocks, Block{ID: fmt.Sprintf("due-%d", d), Team: "t0", State: StateScheduled, InstanceType: "h100.1x",
			Count: 1, Start: benchNow, End: benchNow.Add(48 * time.Hour), Placements: []Placement{{Node: spare, GPUs: []int{d % 8}}}})
	}
	ix, err := NewIndex(&f, blocks, benchNow)
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

// BenchmarkDue is what the reconciler reads of the index in one pass with
// 10 blocks due, among 1,000 and 100,000: the blocks due and each one's
// steps (queue: Index.Due, then Advance on each), against a walk of every
// block asking Advance (walk: the reconciler before the index kept its
// blocks in due order), and the next due time alone (next: a tick with
// nothing due). Then the commit of the 10 steps and their undoing, as
// the index sees them (commit: Add of each stepped block, and of it
// again as it was).
func BenchmarkDue(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		ix := dueIndex(b, n)
		l := ix.Fleet.Limits
		check := func(b *testing.B, due int) {
			if due != 10 {
				b.Fatalf("%d blocks due, want 10", due)
			}
		}
		b.Run(fmt.Sprintf("blocks=%d/due=10/queue", n), func(b *testing.B) {
			for range b.N {
				due := 0
				for _, bl := range ix.Due(benchNow) {
					if _, ts := Advance(*bl, benchNow, l); len(ts) > 0 {
						due++
					}
				}
				check(b, due)
			}
		})
		b.Run(fmt.Sprintf("blocks=%d/due=10/walk", n), func(b *testing.B) {
			for range b.N {
				due := 0
				for _, bl := range ix.Blocks() {
					if _, ts := Advance(*bl, benchNow, l); len(ts) > 0 {
						due++
					}
				}
				check(b, due)
			}
		})
		b.Run(fmt.Sprintf("blocks=%d/due=10/next", n), func(b *testing.B) {
			for range b.N {
				if at, ok := ix.NextDue(); !ok || at.After(benchNow) {
					b.Fatal("nothing due")
				}
			}
		})
		b.Run(fmt.Sprintf("blocks=%d/due=10/commit", n), func(b *testing.B) {
			var was []Block
			for _, bl := range ix.Due(benchNow) {
				was = append(was, *bl)
			}
			for range b.N {
				for _, bl := range was {
					next, _ := Advance(bl, benchNow, l)
					if err := ix.Add(next); err != nil {
						b.Fatal(err)
					}
				}
				for _, bl := range was {
					if err := ix.Add(bl); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
