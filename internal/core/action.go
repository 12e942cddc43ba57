package core

import "time"

// Action is one step that a backend must take to make a decision real:
// activate, terminate or release a block, start or stop a job instance.
// It is written in the same transaction as the change that causes it (an
// outbox row), so that a decision is never stored without its action nor
// an action sent for a decision that was not stored; a worker on the
// leading replica then applies it through the backend until the backend
// acknowledges it, across crashes and changes of leader. Backends take
// each action idempotently, since a worker that dies between applying an
// action and recording it done applies it again.
type Action struct {
	// ID names the action; it is chosen by whoever decides it, so that a
	// retried decision cannot store its action twice.
	ID   string
	Kind ActionKind
	// Subject is what the action acts on: a block id, or a job run key.
	// The actions of one subject apply one at a time, in the order they
	// were stored, so that a block is never released before it was
	// activated, nor an instance stopped before it was started.
	Subject string
	// Team owns the subject; it is kept for the logs and the status
	// pages, which must not show one team another's actions.
	Team string
	// Payload is what the backend needs to act (the block's nodes and
	// GPUs, the job's command), as JSON that the store does not read:
	// the backend sees the subject as the decision saw it, not as it is
	// when the action runs.
	Payload []byte
	State   ActionState
	// Attempts counts the failed tries so far; the worker's backoff
	// grows with it.
	Attempts int
	// NextAt is when the action is next due: its creation at first, then
	// the end of each backoff.
	NextAt time.Time
	// LastError is why the last try failed, for operators.
	LastError string
	CreatedAt time.Time
	// DoneAt is when the action left pending (done, or failed for good);
	// zero while it is pending.
	DoneAt time.Time
	// Trace is the W3C trace context of the decision that stored the
	// action ("" when it was not traced), so that its application, later
	// and maybe on another replica, continues the decision's trace.
	Trace string
}

// ActionKind says what an action does.
type ActionKind string

// The actions a backend takes; DESIGN.md's backend table says what each
// one means on each backend.
const (
	// ActionReserve holds a block's nodes for its window in the engine
	// before it starts (a Slurm reservation), at its purchase and
	// whenever its placement or window changes while it waits; only
	// for backends that hold capacity ahead (backend.Reserver).
	ActionReserve ActionKind = "reserve"
	// ActionActivate makes a block's capacity usable by its team: at
	// the block's start, or when its placement moves.
	ActionActivate ActionKind = "activate"
	// ActionTerminate stops the workloads on a block before its end.
	ActionTerminate ActionKind = "terminate"
	// ActionRelease gives a block's capacity back at its end, on
	// cancellation or on early release.
	ActionRelease ActionKind = "release"
	// ActionStartInstance starts one instance of a job's run.
	ActionStartInstance ActionKind = "start-instance"
	// ActionStopInstance stops one instance of a job's run.
	ActionStopInstance ActionKind = "stop-instance"
)

// Valid reports whether k is one of the kinds above.
func (k ActionKind) Valid() bool {
	switch k {
	case ActionReserve, ActionActivate, ActionTerminate, ActionRelease, ActionStartInstance, ActionStopInstance:
		return true
	}
	return false
}

// ActionState is where an action stands.
type ActionState string

const (
	// ActionPending waits for the worker: due at NextAt.
	ActionPending ActionState = "pending"
	// ActionDone was acknowledged by the backend; it is kept a while for
	// the block's status, then pruned.
	ActionDone ActionState = "done"
	// ActionFailed was given up on after too many attempts, or an error
	// that no retry can mend; an operator must look at it. Later actions
	// of its subject no longer wait for it.
	ActionFailed ActionState = "failed"
)

// Valid reports whether s is one of the states above.
func (s ActionState) Valid() bool {
	return s == ActionPending || s == ActionDone || s == ActionFailed
}

// BlockActionOf returns the engine action that a block's lifecycle event
// calls for, and false for an event that calls for none: a block becomes
// active (activate), its workloads are stopped ahead of its end
// (terminate), it ends, is cancelled or its payment fails (release; a
// backend releases what it never activated as a no-op, since a cancelled
// block may have started).
func BlockActionOf(event string) (ActionKind, bool) {
	switch event {
	case EventBlockActive:
		return ActionActivate, true
	case EventBlockTerminating:
		return ActionTerminate, true
	case EventBlockExpired, EventBlockCancelled, EventBlockPaymentFailed:
		return ActionRelease, true
	}
	return "", false
}
