package backend

import (
	"time"

	"capblock/internal/core"
)

// Actions tell an engine what changed, once; convergence keeps it told.
// The leader reads the desired state of the fleet from its index (the
// store's truth: which blocks are live, at which version, on which
// nodes) and hands it to a backend that can compare it with the engine
// (Converger), again whenever it changes. The backend compares the
// engine's actual state with it continuously (Kubernetes: on its
// informer's events and a periodic resync; Slurm: at each poll) and
// repairs any difference: a block's label missing from a node re-created
// by auto-repair, a label removed or added by hand, a reservation
// deleted or changed. Actions stay the fast path; convergence is the
// guarantee.
//
// Writes are fenced by the block's version. Every capblock write about a
// block records the block's version in the engine (a Kubernetes node
// annotation, a Slurm reservation's comment), and a write of an older
// version than the one recorded is refused: an activation of version 3,
// applied late by a leader that lost its lease, never undoes the release
// of version 4.
//
// Objects capblock did not write are never touched: labels outside its
// domain, an operator's reservations, unsold nodes.

// Desired is the engine state that the store calls for, as one leader's
// index holds it at one moment.
type Desired struct {
	// Epoch is the term of the leader that read it (store.Lease).
	Epoch int64
	// At is when it was read, on the service's clock.
	At time.Time
	// Blocks are the live blocks whose last change is committed, each at
	// its stored version: an active block holds its nodes on every
	// engine; a scheduled one holds them ahead only on a Reserver.
	Blocks []core.Block
	// Unsettled are the blocks that a decision in flight changes: their
	// engine state is left as it is until the decision commits or fails.
	Unsettled []string
}

// Converger is a Backend that converges the engine on a desired state.
type Converger interface {
	// Converge replaces the state that the backend repairs the engine
	// toward, and returns at once: the comparison and the repairs run on
	// the backend's own goroutines. nil stops the repairs (this replica
	// no longer leads); a later call starts them again.
	Converge(d *Desired)
}

// Unknown blocks. A block the desired state does not name is either over
// (its index dropped it) or so new that the leader's index has not
// caught up with the commit that bought it, while an action applied
// from the store already did. A backend removes the engine state that
// capblock wrote for such a block only once it has stayed unknown for
// UnknownGrace; state for it that capblock never wrote (no version
// recorded) goes at once.
const UnknownGrace = time.Second
