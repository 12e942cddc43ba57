package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"capblock/internal/core"
)

// Outbox is the durable queue of engine actions. Commit writes them
// (Change.Actions) with the change that causes them; the outbox worker of
// the leading replica claims what is due under its lease's epoch, applies
// it through the backend and records the outcome here, under that epoch.
// It is an interface of its own, as Jobs and Plans are, so that the worker
// and its tests depend on these methods only. Every method is safe for
// concurrent use.
//
// The actions of one subject run one at a time, in the order they were
// stored (by commit, then by their order in Change.Actions): an action
// waits while an older one of its subject is pending, and runs once that
// one is done or failed.
//
// The records are fenced (see Leases): ClaimActions, FinishAction,
// RetryAction and FailAction take effect only while the lease of their
// epoch is current, checked in the statement or transaction that writes,
// and a record takes effect only on an action claimed by its epoch. A
// leader deposed while it applied an action (a process paused past its
// lease, a partition) can therefore change nothing: its records are
// refused with ErrLeaseLost, and the next leader claims the action again.
//
// The times of actions (and of node health) are stored to the
// microsecond, truncated, the precision of PostgreSQL's timestamps: finer
// than the whole seconds of the other rows, since a retry's backoff may
// be shorter than a second.
type Outbox interface {
	// DueActions returns up to limit actions (all when limit <= 0) that
	// are due at now: of each subject with pending actions, its oldest
	// pending one, when its NextAt is not after now. They come ordered by
	// NextAt, then CreatedAt, then ID. Its cost follows the pending
	// actions that are due, not the stored ones. It only reads: it
	// claims nothing.
	DueActions(ctx context.Context, now time.Time, limit int) ([]core.Action, error)
	// ClaimActions returns what DueActions returns, each action claimed
	// by epoch (taken from any earlier epoch that claimed it), in one
	// transaction that first checks that the lease of epoch is current:
	// when it is not, the error wraps ErrLeaseLost and nothing is
	// claimed. A driver that replicas share skips the due actions that
	// another transaction holds at that moment.
	ClaimActions(ctx context.Context, epoch int64, now time.Time, limit int) ([]core.Action, error)
	// FinishAction records a pending action claimed by epoch done at at,
	// and reports whether it did. When the lease of epoch is not current
	// the error wraps ErrLeaseLost and the action is left as it is.
	// Otherwise changed is false, with no error, when the action had
	// already left pending (done by another worker, or failed) or is
	// claimed by another epoch (or none), which it then keeps as it was.
	// An unknown id is ErrNotFound.
	FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (changed bool, err error)
	// RetryAction records a failed try of a pending action claimed by
	// epoch: its attempts so far, when it is next due and why it failed
	// (stored as CleanLastError leaves it). When the lease of epoch is
	// not current the error wraps ErrLeaseLost; an action no longer
	// pending, or claimed by another epoch, is left as it is and the
	// error wraps ErrConflict; an unknown id is ErrNotFound.
	RetryAction(ctx context.Context, epoch int64, id string, attempts int, nextAt time.Time, lastErr string) error
	// FailAction gives up on a pending action claimed by epoch after a
	// failed try: it becomes failed at at, with one attempt more and
	// lastErr as its last error, and the next action of its subject may
	// run. When the lease of epoch is not current the error wraps
	// ErrLeaseLost; an action no longer pending, or claimed by another
	// epoch, is left as it is and the error wraps ErrConflict; an
	// unknown id is ErrNotFound.
	FailAction(ctx context.Context, epoch int64, id string, at time.Time, lastErr string) error
	// ActionsFor returns the actions of a subject in the order they were
	// stored, pruned ones excepted.
	ActionsFor(ctx context.Context, subject string) ([]core.Action, error)
	// ActionCounts returns how many actions are pending and how many
	// failed, for the metrics.
	ActionCounts(ctx context.Context) (pending, failed int64, err error)
	// PruneActions removes the done actions that finished before
	// doneBefore and returns how many. Pending and failed ones stay.
	PruneActions(ctx context.Context, doneBefore time.Time) (int64, error)
}

// Health reads the stored health of the nodes; Commit writes it
// (Change.NodeHealth), in the same transaction as the blocks that a
// node's failure moves.
type Health interface {
	// NodeHealth returns every stored record, ordered by node. A node
	// that was never recorded is healthy: it has no record.
	NodeHealth(ctx context.Context) ([]core.NodeHealth, error)
}

// validateActions rejects actions that no stored state could accept. A
// new action is pending: a State other than pending (or empty, which
// means pending) is refused, and so are attempts, a last error or a
// DoneAt, which only the worker's records give it.
func validateActions(as []core.Action) error {
	for _, a := range as {
		switch {
		case a.ID == "":
			return core.Invalidf("an action needs an id")
		case !a.Kind.Valid():
			return fmt.Errorf("action %s: %w", a.ID, core.Invalidf("unknown kind %q", a.Kind))
		case a.Subject == "":
			return fmt.Errorf("action %s: %w", a.ID, core.Invalidf("an action needs a subject"))
		case a.State != "" && a.State != core.ActionPending:
			return fmt.Errorf("action %s: %w", a.ID, core.Invalidf("a new action is pending, not %q", a.State))
		case a.Attempts != 0 || a.LastError != "" || !a.DoneAt.IsZero():
			return fmt.Errorf("action %s: %w", a.ID, core.Invalidf("a new action has no attempts, last error or end"))
		case len(a.Payload) > 0 && !json.Valid(a.Payload):
			return fmt.Errorf("action %s: %w", a.ID, core.Invalidf("its payload is not JSON"))
		}
	}
	return nil
}

// validateNodeHealth rejects health records that no stored state could
// accept, and a node recorded twice in one change (which record would
// win is not said).
func validateNodeHealth(hs []core.NodeHealth) error {
	seen := make(map[string]bool, len(hs))
	for _, h := range hs {
		switch {
		case h.Node == "":
			return core.Invalidf("a node health record needs a node")
		case h.Health != core.Healthy && h.Health != core.Unhealthy:
			return fmt.Errorf("health of node %s: %w", h.Node, core.Invalidf("unknown health %q", h.Health))
		case !h.Source.Valid():
			return fmt.Errorf("health of node %s: %w", h.Node, core.Invalidf("unknown source %q", h.Source))
		case seen[h.Node]:
			return fmt.Errorf("health of node %s: %w", h.Node, core.Invalidf("the node comes twice in one change"))
		}
		seen[h.Node] = true
	}
	return nil
}

// maxLastError bounds the stored last error of an action, in bytes: it
// is for operators to read, and a backend's error may carry a long
// output.
const maxLastError = 2000

// CleanLastError is an action's last error as the drivers store it: valid
// UTF-8 without NUL bytes (which PostgreSQL's text refuses, and which
// must not keep a worker from recording a failure), cut to maxLastError
// bytes.
func CleanLastError(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.ReplaceAll(msg, "\x00", "\uFFFD")
	if len(msg) <= maxLastError {
		return msg
	}
	cut := maxLastError
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// ActionNotPending is the error of RetryAction or FailAction on an action
// that is no longer pending.
func ActionNotPending(what, id string, state core.ActionState) error {
	return fmt.Errorf("%s action %s: it is %s, no longer pending: %w", what, id, state, ErrConflict)
}

// ActionNotClaimed is the error of RetryAction or FailAction under epoch
// on a pending action that epoch did not claim (claimed is 0 when none
// did): it is as good as gone for that epoch's worker.
func ActionNotClaimed(what, id string, epoch, claimed int64) error {
	if claimed == 0 {
		return fmt.Errorf("%s action %s under epoch %d: no epoch claimed it: %w", what, id, epoch, ErrConflict)
	}
	return fmt.Errorf("%s action %s under epoch %d: epoch %d claimed it: %w", what, id, epoch, claimed, ErrConflict)
}
