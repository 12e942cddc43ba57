package storetest

import (
	"fmt"
	"sync"
	"testing"

	"capblock/internal/core"
	"capblock/internal/store"
)

// testConcurrentCommits races 32 inserts on the GPUs of one node: 8 time
// slots of 2 hours, back to back, each wanted by 4 blocks that all hold
// GPU 0 over the slot's first hour. Exactly one block per slot must win,
// whatever the order, while readers keep reading.
func testConcurrentCommits(t *testing.T, h Harness) {
	const slots, contenders = 8, 4
	s := h.Open(t)
	gpuSets := [contenders][]int{{0}, {0, 1}, {0, 1, 2, 3, 4, 5, 6, 7}, {3, 0}}

	var wg sync.WaitGroup
	errs := make([][contenders]error, slots)
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() { readerErr <- readUntil(t, s, stop) }()
	start := make(chan struct{})
	for slot := range slots {
		for c := range contenders {
			b := makeBlock(fmt.Sprintf("s%d-c%d", slot, c)).
				on("n1", gpuSets[c]...).hours(2*slot, 2*slot+1+c%2).obj()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[slot][c] = s.Commit(t.Context(), insert(b))
			}()
		}
	}
	close(start)
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatalf("reading during commits: %v", err)
	}

	for slot := range slots {
		won := 0
		for c := range contenders {
			switch err := errs[slot][c]; {
			case err == nil:
				won++
			case !store.IsConflict(err):
				t.Errorf("block s%d-c%d: got error %v, want nil or a conflict", slot, c, err)
			}
		}
		if won != 1 {
			t.Errorf("slot %d: %d commits succeeded, want exactly 1", slot, won)
		}
	}
	blocks, err := s.ListBlocks(t.Context(), store.BlockFilter{})
	if err != nil {
		t.Fatalf("ListBlocks: %v", err)
	}
	if len(blocks) != slots {
		t.Errorf("stored %d blocks, want %d", len(blocks), slots)
	}
	if a, b, ok := findDoubleBooking(blocks); ok {
		t.Errorf("blocks %s and %s share a GPU at the same time", a, b)
	}
}

// readUntil lists blocks until stop is closed.
func readUntil(t *testing.T, s store.Store, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		if _, err := s.ListBlocks(t.Context(), store.BlockFilter{Team: "team-a"}); err != nil {
			return err
		}
	}
}

// findDoubleBooking returns two live blocks that hold the same GPU at the
// same time.
func findDoubleBooking(blocks []core.Block) (string, string, bool) {
	type gpu struct {
		node string
		idx  int
	}
	for i, a := range blocks {
		if !a.State.Live() {
			continue
		}
		held := map[gpu]bool{}
		for _, p := range a.Placements {
			for _, g := range p.GPUs {
				held[gpu{p.Node, g}] = true
			}
		}
		for _, b := range blocks[i+1:] {
			if !b.State.Live() || !a.Start.Before(b.End) || !b.Start.Before(a.End) {
				continue
			}
			for _, p := range b.Placements {
				for _, g := range p.GPUs {
					if held[gpu{p.Node, g}] {
						return a.ID, b.ID, true
					}
				}
			}
		}
	}
	return "", "", false
}
