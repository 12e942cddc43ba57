package simulate

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// maxEngineFaults is how many tries of one engine call may fail: the
// ones after always pass, so that every action is taken in the end.
const maxEngineFaults = 3

// Engine is the engine the simulation runs: the sim backend
// (local.Sim), or a mutant of it (Config.MutantSim).
type Engine interface {
	backend.Backend
	// State is what the engine holds of a block: "active",
	// "terminating", or "" for nothing.
	State(id string) string
	// LastWrite is the last write of a block the engine took: its kind
	// and the block's version.
	LastWrite(id string) (kind core.ActionKind, version int64, ok bool)
}

// engineFault is what the network between the service and the engine
// does to one call.
type engineFault int

const (
	enginePasses engineFault = iota
	// engineFails: the call never reaches the engine.
	engineFails
	// engineLosesAnswer: the engine takes the call, its answer is lost.
	engineLosesAnswer
	// engineHangs: the call does not return until the caller's context
	// ends; the engine takes it later, after calls made since (out of
	// order), or never (faultlate.go).
	engineHangs
)

// faultEngine is the simulated engine (an Engine) behind calls that
// fail, lose their answer, or hang, as the seed decides. It outlives
// restarts of the service: it is the world outside the server.
//
// A call's fate is a hash of the seed, the call (kind, block, version)
// and how many times that call was made before, not a draw from a
// stream: the outbox worker may make the calls of different blocks in
// any order, and each still meets the same fate on a replay.
type faultEngine struct {
	inner Engine
	seed  uint64
	rates Faults

	mu  sync.Mutex
	off bool
	// nodes, when set, are the inventory the engine reports instead of
	// the sim's: the fleet an operator changed (opInventory).
	nodes  []core.Node
	tries  map[string]int  // by call
	blocks map[string]bool // every block the engine was told of
	counts [4]int          // by engineFault
	// applied is, by block, the last write the engine took: its version
	// and, for an activation, the GPUs it made usable.
	applied map[string]engineWrite
	// stale is the first write the engine took that is older than one
	// it had taken (DESIGN.md, invariant 11).
	stale string
	// tight is the first call made under a wall-clock deadline short
	// enough for a busy machine to pass it (faultlate.go).
	tight string
	// late are the calls that hung, each waiting to reach the engine
	// (faultlate.go); calls counts the calls made, which time them.
	late  []lateCall
	calls int
	// landed counts the late calls the engine took, and refused those
	// its fence refused as older than a write it had taken.
	landed, refused int
	// onCall, when set, runs once, at the next call, before the call
	// reaches the engine (a change of leader while it hangs).
	onCall func()
	// lateHook is told of each late call as it lands, for the step's
	// record.
	lateHook func(c lateCall, taken bool)
	// down are the nodes the engine says failed (faultnodes.go).
	down map[string]bool
}

// engineWrite is one write of a block the engine took.
type engineWrite struct {
	kind       core.ActionKind
	version    int64
	placements []core.Placement
}

// before reports whether w is older than v: of an older version of the
// block, or of the same version and an earlier step of its life.
func (w engineWrite) before(v engineWrite) bool {
	if w.version != v.version {
		return w.version < v.version
	}
	return lifeStep(w.kind) < lifeStep(v.kind)
}

// lifeStep orders the actions on a block as its life takes them: one
// commit may store several of them, all at the block's new version.
func lifeStep(k core.ActionKind) int {
	return slices.Index([]core.ActionKind{core.ActionReserve, core.ActionActivate, core.ActionTerminate, core.ActionRelease}, k)
}

var _ backend.Backend = (*faultEngine)(nil)

func newFaultEngine(inner Engine, seed uint64, rates Faults) *faultEngine {
	return &faultEngine{inner: inner, seed: seed, rates: rates, tries: map[string]int{}, blocks: map[string]bool{}, applied: map[string]engineWrite{},
		down: map[string]bool{}}
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
// fails (the answer lost), or hangs it, or makes it. The calls that hung
// before and are due land first.
func (e *faultEngine) call(ctx context.Context, kind core.ActionKind, b core.Block, next func(context.Context, core.Block) error) error {
	key := fmt.Sprintf("%s %s v%d", kind, b.ID, b.Version)
	e.landDue()
	e.mu.Lock()
	deadline, bounded := ctx.Deadline()
	if left := time.Until(deadline); bounded && left < minWallDeadline && e.tight == "" {
		e.tight = fmt.Sprintf("%s of block %s has %s left on the wall clock", kind, b.ID, left.Round(time.Microsecond))
	}
	try := e.tries[key]
	e.tries[key]++
	e.blocks[b.ID] = true
	fault := enginePasses
	if !e.off && try < maxEngineFaults {
		switch u := unitHash(e.seed, key, try); {
		case u < e.rates.EngineFails:
			fault = engineFails
		case u < e.rates.EngineFails+e.rates.EngineLosesAnswer:
			fault = engineLosesAnswer
		case u < e.rates.EngineFails+e.rates.EngineLosesAnswer+e.rates.EngineHangs:
			fault = engineHangs
		}
	}
	if fault == engineHangs && !bounded {
		fault = engineFails // a call that nothing ends cannot hang
	}
	e.counts[fault]++
	onCall := e.onCall
	e.onCall = nil
	e.mu.Unlock()
	if onCall != nil {
		onCall()
	}
	switch fault {
	case engineFails:
		return fmt.Errorf("%s of block %s: %w: the engine did not answer", kind, b.ID, errInjected)
	case engineHangs:
		return e.hang(kind, b, key, try)
	}
	if err := next(ctx, b); err != nil {
		return err
	}
	e.took(kind, b)
	if fault == engineLosesAnswer {
		return fmt.Errorf("%s of block %s: %w: the engine took it, its answer was lost", kind, b.ID, errInjected)
	}
	return nil
}

// took records a write the engine took, if it did (its fence may have
// refused it: took is false), and the first one older than a write it
// took before.
func (e *faultEngine) took(kind core.ActionKind, b core.Block) bool {
	if k, v, ok := e.inner.LastWrite(b.ID); !ok || k != kind || v != b.Version {
		return false
	}
	w := engineWrite{kind: kind, version: b.Version, placements: b.Placements}
	e.mu.Lock()
	defer e.mu.Unlock()
	last, ok := e.applied[b.ID]
	if ok && w.before(last) && e.stale == "" {
		e.stale = fmt.Sprintf("the engine took %s of block %s at version %d after %s at version %d", kind, b.ID, b.Version, last.kind, last.version)
	}
	if !ok || !w.before(last) {
		e.applied[b.ID] = w
	}
	return true
}

// staleWrite is the first stale write the engine took, or "".
func (e *faultEngine) staleWrite() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stale
}

// tightDeadline is the first call made under a wall-clock deadline
// shorter than minWallDeadline; empty when none was.
func (e *faultEngine) tightDeadline() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tight
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

// injected counts the calls failed, those whose answers were lost, and
// those that hung.
func (e *faultEngine) injected() (failed, lost, hung int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[engineFails], e.counts[engineLosesAnswer], e.counts[engineHangs]
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
