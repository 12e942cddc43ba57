package simulate

import (
	"testing"
	"time"

	"capblock/internal/core"
)

// TestAllocations: the double-booking check finds a GPU in two live
// blocks whose windows share an hour, and nothing else. (No store lets
// such a commit through, so no mutant can show it.)
func TestAllocations(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	block := func(id string, state core.BlockState, from, to int, node string, gpus ...int) core.Block {
		return core.Block{ID: id, State: state, Start: h(from), End: h(to), Placements: []core.Placement{{Node: node, GPUs: gpus}}}
	}
	held := block("a", core.StateScheduled, 2, 5, "h0", 0, 1)
	for name, tc := range map[string]struct {
		b       core.Block
		from    int // the hour it took its GPUs, when after its start
		overlap bool
	}{
		"the same GPU over a shared hour":     {block("b", core.StateActive, 4, 6, "h0", 1, 2), 0, true},
		"the same GPU, one window inside":     {block("b", core.StateScheduled, 3, 4, "h0", 0), 0, true},
		"the same GPU right after":            {block("b", core.StateScheduled, 5, 8, "h0", 0, 1), 0, false},
		"the same GPU right before":           {block("b", core.StateScheduled, 0, 2, "h0", 0), 0, false},
		"other GPUs of the node":              {block("b", core.StateScheduled, 2, 5, "h0", 2, 3), 0, false},
		"the same GPU index on another node":  {block("b", core.StateScheduled, 2, 5, "h1", 0, 1), 0, false},
		"the same GPU, but cancelled":         {block("b", core.StateCancelled, 2, 5, "h0", 0, 1), 0, false},
		"the same GPU, payment pending":       {block("b", core.StatePaymentPending, 2, 5, "h0", 1), 0, true},
		"the block itself at another version": {block("a", core.StateActive, 2, 6, "h0", 0, 1), 0, false},
		"moved onto the GPU after it is free": {block("b", core.StateActive, 1, 8, "h0", 0), 5, false},
		"moved onto the GPU while it is held": {block("b", core.StateActive, 1, 8, "h0", 0), 4, true},
	} {
		t.Run(name, func(t *testing.T) {
			a := allocations{}
			if err := a.take(held, time.Time{}); err != nil {
				t.Fatal(err)
			}
			var from time.Time
			if tc.from > 0 {
				from = h(tc.from)
			}
			err := a.take(tc.b, from)
			if got := err != nil; got != tc.overlap {
				t.Errorf("take: %v; want an overlap: %v", err, tc.overlap)
			}
		})
	}
	t.Run("a block dropped frees its GPUs", func(t *testing.T) {
		a := allocations{}
		if err := a.take(held, time.Time{}); err != nil {
			t.Fatal(err)
		}
		a.drop(held)
		if err := a.take(block("b", core.StateActive, 2, 5, "h0", 0, 1), time.Time{}); err != nil {
			t.Errorf("take after drop: %v", err)
		}
	})
}
