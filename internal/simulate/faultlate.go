package simulate

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/core"
)

// Calls that hang. An engine call that hangs answers as a call to an
// engine that does not answer does once the outbox worker's CallTimeout
// cuts it off: with the deadline passed. The worker records the try
// failed and applies the action again after its backoff. The request
// itself is not lost for all that: it reaches the engine later, after
// calls made since (a later action of the same block among them, out of
// order), or never. The engine's version fence must refuse it when the
// engine took a later write of the block meanwhile (DESIGN.md,
// invariant 11).
//
// The call answers at once: no wait on the wall clock, whose length
// would depend on how busy the machine is. When the late request lands
// is counted in engine calls, not in time, so that a replay lands it at
// the same place.

// callTimeout is the outbox's CallTimeout in the simulation. No call of
// the simulation waits on the wall clock (a hung call answers at once,
// as if its deadline had passed), so the bound only cuts off a call
// that truly hangs: a defect, which it turns into a failed step instead
// of a stalled run. It is long, so that a slow machine (the race
// detector, other tests beside) never cuts off a call that was going to
// answer, and a seed replays the same on any machine.
const callTimeout = time.Minute

// minWallDeadline is the shortest wall-clock deadline an engine call may
// carry in the simulation: one shorter could pass while a busy machine
// (the race detector, other tests beside) runs the call, which would
// then take another turn than on the run it replays. The simulation
// fails on such a call, on any machine, instead of on a busy one only.
const minWallDeadline = 10 * time.Second

// lateCall is a call that hung, on its way to the engine.
type lateCall struct {
	kind  core.ActionKind
	block core.Block
	at    int // the engine call before which it lands
}

// hang queues the call to land later (or never), then answers as the
// call's deadline would.
func (e *faultEngine) hang(kind core.ActionKind, b core.Block, key string, try int) error {
	// Three hung calls in four reach the engine, after 1 to 30 more
	// calls.
	if u := unitHash(e.seed, key+" lands", try); u >= 0.25 {
		e.mu.Lock()
		e.late = append(e.late, lateCall{kind: kind, block: b, at: e.calls + 1 + int((u-0.25)/0.75*30)})
		e.mu.Unlock()
	}
	return fmt.Errorf("%s of block %s: %w: the engine did not answer before the call's deadline: %w", kind, b.ID, errInjected, context.DeadlineExceeded)
}

// landDue counts a call made to the engine, and lands the calls that
// hung and are due before it.
func (e *faultEngine) landDue() {
	e.mu.Lock()
	e.calls++
	var due []lateCall
	kept := e.late[:0]
	for _, c := range e.late {
		if c.at <= e.calls {
			due = append(due, c)
		} else {
			kept = append(kept, c)
		}
	}
	e.late = kept
	e.mu.Unlock()
	for _, c := range due {
		e.land(c)
	}
}

// landAll lands every call that hung and has not landed yet: the world
// heals.
func (e *faultEngine) landAll() {
	e.mu.Lock()
	due := e.late
	e.late = nil
	e.mu.Unlock()
	for _, c := range due {
		e.land(c)
	}
}

// land makes a late call reach the engine. Nobody waits for its answer.
func (e *faultEngine) land(c lateCall) {
	var err error
	ctx := context.Background()
	switch c.kind {
	case core.ActionActivate:
		err = e.inner.Activate(ctx, c.block)
	case core.ActionTerminate:
		err = e.inner.Terminate(ctx, c.block)
	case core.ActionRelease:
		err = e.inner.Release(ctx, c.block)
	}
	taken := err == nil && e.took(c.kind, c.block)
	e.mu.Lock()
	if taken {
		e.landed++
	} else {
		e.refused++
	}
	hook := e.lateHook
	e.mu.Unlock()
	if hook != nil {
		hook(c, taken)
	}
}

// lateCounts are how many late calls the engine took, and how many its
// fence refused.
func (e *faultEngine) lateCounts() (landed, refused int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.landed, e.refused
}
