package simulate

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/core"
)

// maxEngineFaults is how many tries of one engine call may fail: the
// ones after always pass, so that every action is taken in the end.
const maxEngineFaults = 3

// faultEngine is the simulated engine (local.Sim) behind calls that fail
// or whose answers are lost, as the seed decides. It outlives restarts
// of the service: it is the world outside the server.
//
// A call's fate is a hash of the seed, the call (kind, block, version)
// and how many times that call was made before, not a draw from a
// stream: the outbox worker may make the calls of different blocks in
// any order, and each still meets the same fate on a replay.
type faultEngine struct {
	inner *local.Sim
	seed  uint64
	rates Faults

	mu  sync.Mutex
	off bool
	// nodes, when set, are the inventory the engine reports instead of
	// the sim's: the fleet an operator changed (opInventory).
	nodes  []core.Node
	tries  map[string]int  // by call
	blocks map[string]bool // every block the engine was told of
	counts [3]int          // passed, failed, lost
	// applied is, by block, the last write the engine took: its
	// version and, for an activation, the GPUs it made usable.
	applied map[string]engineWrite
	// stale is the first write the engine took of an older version of a
	// block than one it had taken (DESIGN.md, invariant 11).
	stale string
}

// engineWrite is one write of a block the engine took.
type engineWrite struct {
	kind       core.ActionKind
	version    int64
	placements []core.Placement
}

var _ backend.Backend = (*faultEngine)(nil)

func newFaultEngine(inner *local.Sim, seed uint64, rates Faults) *faultEngine {
	return &faultEngine{inner: inner, seed: seed, rates: rates, tries: map[string]int{}, blocks: map[string]bool{}, applied: map[string]engineWrite{}}
}

func (e *faultEngine) Name() string { return e.inner.Name() }

// Inventory is the sim's, the fleet's nodes, or those set since. It
// never fails, so that a restart always finds its nodes.
func (e *faultEngine) Inventory(ctx context.Context) ([]core.Node, error) {
	e.mu.Lock()
	nodes := slices.Clone(e.nodes)
	e.mu.Unlock()
	if nodes == nil {
		return e.inner.Inventory(ctx)
	}
	return nodes, nil
}

// setInventory makes the engine report nodes from now on.
func (e *faultEngine) setInventory(nodes []core.Node) {
	e.mu.Lock()
	e.nodes = slices.Clone(nodes)
	e.mu.Unlock()
}

func (e *faultEngine) Activate(ctx context.Context, b core.Block) error {
	return e.call(ctx, core.ActionActivate, b, e.inner.Activate)
}

func (e *faultEngine) Terminate(ctx context.Context, b core.Block) error {
	return e.call(ctx, core.ActionTerminate, b, e.inner.Terminate)
}

func (e *faultEngine) Release(ctx context.Context, b core.Block) error {
	return e.call(ctx, core.ActionRelease, b, e.inner.Release)
}

// call fails the call before it reaches the engine, or makes it and then
// fails (the answer lost), or makes it.
func (e *faultEngine) call(ctx context.Context, kind core.ActionKind, b core.Block, next func(context.Context, core.Block) error) error {
	key := fmt.Sprintf("%s %s v%d", kind, b.ID, b.Version)
	e.mu.Lock()
	try := e.tries[key]
	e.tries[key]++
	e.blocks[b.ID] = true
	fault := 0
	if !e.off && try < maxEngineFaults {
		switch u := unitHash(e.seed, key, try); {
		case u < e.rates.EngineFails:
			fault = 1
		case u < e.rates.EngineFails+e.rates.EngineLosesAnswer:
			fault = 2
		}
	}
	e.counts[fault]++
	e.mu.Unlock()
	if fault == 1 {
		return fmt.Errorf("%s of block %s: %w: the engine did not answer", kind, b.ID, errInjected)
	}
	if err := next(ctx, b); err != nil {
		return err
	}
	e.took(kind, b)
	if fault == 2 {
		return fmt.Errorf("%s of block %s: %w: the engine took it, its answer was lost", kind, b.ID, errInjected)
	}
	return nil
}

// took records a write the engine took, and the first one older than a
// write it took before.
func (e *faultEngine) took(kind core.ActionKind, b core.Block) {
	e.mu.Lock()
	defer e.mu.Unlock()
	last, ok := e.applied[b.ID]
	if ok && b.Version < last.version && e.stale == "" {
		e.stale = fmt.Sprintf("the engine took %s of block %s at version %d after %s at version %d", kind, b.ID, b.Version, last.kind, last.version)
	}
	if !ok || b.Version >= last.version {
		e.applied[b.ID] = engineWrite{kind: kind, version: b.Version, placements: b.Placements}
	}
}

// staleWrite is the first stale write the engine took, or "".
func (e *faultEngine) staleWrite() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stale
}

// lastWrite is the last write the engine took of block id.
func (e *faultEngine) lastWrite(id string) (engineWrite, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.applied[id]
	return w, ok
}

func (e *faultEngine) setOff(off bool) {
	e.mu.Lock()
	e.off = off
	e.mu.Unlock()
}

// held returns what the engine holds, by block: "active" or
// "terminating", for every block it holds.
func (e *faultEngine) held() map[string]string {
	e.mu.Lock()
	ids := make([]string, 0, len(e.blocks))
	for id := range e.blocks {
		ids = append(ids, id)
	}
	e.mu.Unlock()
	slices.Sort(ids)
	out := map[string]string{}
	for _, id := range ids {
		if st := e.inner.State(id); st != "" {
			out[id] = st
		}
	}
	return out
}

func (e *faultEngine) injected() (failed, lost int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[1], e.counts[2]
}

// unitHash is a number in [0, 1) that the seed, key and try decide.
func unitHash(seed uint64, key string, try int) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d", seed, key, try)
	return float64(mix64(h.Sum64())>>11) / (1 << 53)
}

// mix64 is SplitMix64's finaliser: it spreads the bits of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
