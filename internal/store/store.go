// Package store defines the one interface through which capblock persists
// blocks, their allocations, idempotency records, the ledger and events.
// Drivers live in sub-packages (sqlite, the embedded default; postgres,
// shared by replicas) and all pass the conformance suite in storetest.
package store

import (
	"context"
	"errors"
	"time"

	"capblock/internal/core"
)

// ErrConflict is returned by Commit when the change no longer fits the
// stored state: a block's version moved, an allocation overlaps a live
// allocation of another block, or an idempotency key is already taken. The
// service retries on a fresh snapshot. It wraps core.ErrConflict.
var ErrConflict = core.ErrConflict

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = core.ErrNotFound

// Store is capblock's persistence. Every method is safe for concurrent use.
type Store interface {
	// Secret returns the server's signing secret as stored; ok is false
	// when none is stored yet.
	Secret(ctx context.Context) (s SigningSecret, ok bool, err error)
	// InitSecret stores s as the signing secret unless one is stored
	// already, and returns the one stored: replicas starting at once
	// agree on one.
	InitSecret(ctx context.Context, s SigningSecret) (SigningSecret, error)
	// SealSecret replaces the signing secret stored in clear, if it is
	// still that clear one, with its sealed form; otherwise (none is
	// stored, or another replica sealed it first) it is ErrConflict.
	SealSecret(ctx context.Context, clear []byte, sealed core.SealedSecret) error

	// Commit applies a change in one transaction, re-checking it first:
	//  - every block in Update must exist with Version == ExpectedVersion;
	//  - every allocation of Insert and of an Update with Placements set
	//    must not overlap (same node, same GPU, intersecting [start,end))
	//    an allocation of a live block outside this change;
	//  - Idempotency keys (team, clientToken) must be new.
	// Any failed check returns an error wrapping ErrConflict and stores
	// nothing. So does an offering of Offerings already used, but its error
	// wraps core.ErrOfferingUsed instead (not a conflict: retrying cannot
	// help); the idempotency keys are checked first, so a retry of the
	// purchase that used it fails as a conflict. On success inserted
	// blocks have Version 1, updated blocks ExpectedVersion+1, and events
	// get their Seq.
	Commit(ctx context.Context, c Change) error

	// OfferingUsed reports whether a commit stored the offering id in its
	// Offerings (and the row was not pruned since).
	OfferingUsed(ctx context.Context, id string) (bool, error)
	// PruneUsedOfferings forgets the used offerings that expired before
	// before and returns how many. A forgotten offering can be used
	// again, so before must not be later than the service clock's now
	// (less a margin for the skew between replicas' clocks): until then
	// an expired quote is refused anyway.
	PruneUsedOfferings(ctx context.Context, before time.Time) (int64, error)

	// SimClock returns the stored time of the simulated clock; ok is false
	// when none was ever stored.
	SimClock(ctx context.Context) (t time.Time, ok bool, err error)
	// SaveSimClock stores t as the simulated clock's time unless the
	// stored one is later (the clock never moves back, whichever replica
	// moves it) and returns the time stored now. Times are stored to the
	// nanosecond, between the years 1678 and 2261.
	SaveSimClock(ctx context.Context, t time.Time) (time.Time, error)

	// GetBlock returns a block with its placements.
	GetBlock(ctx context.Context, id string) (core.Block, error)
	// ListBlocks returns blocks matching the filter, ordered by start time
	// then id, with placements.
	ListBlocks(ctx context.Context, f BlockFilter) ([]core.Block, error)

	// Idempotency returns the record stored for (team, clientToken), or
	// ErrNotFound.
	Idempotency(ctx context.Context, team, clientToken string) (IdempotencyRecord, error)

	// Events returns up to limit events of a team with Seq > after,
	// ordered by Seq; every team's when team is "". A team's reader sees
	// nothing of other teams' events, not even how many there are: the
	// filter is the query's, not the caller's.
	Events(ctx context.Context, team string, after int64, limit int) ([]core.Event, error)
	// Ledger returns the lines of a team's wallet (every team's when team
	// is ""), in journal order: by the journals' Seq, then their postings'
	// order.
	Ledger(ctx context.Context, team string) ([]core.LedgerEntry, error)
	// Spent is a team's own spending with time at or after since, as a
	// budget guard counts it (core.Posting.Spending; credits only when
	// credits is set): the sum Commit checks a guard against, read
	// without reading the ledger's lines.
	Spent(ctx context.Context, team string, since time.Time, credits bool) (int64, error)
	// Journals returns the journals that f selects, with all their
	// postings, ordered by Seq.
	Journals(ctx context.Context, f JournalFilter) ([]core.Journal, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close() error
}

// BlockFilter selects blocks. Zero fields do not filter.
type BlockFilter struct {
	Team   string
	States []core.BlockState
	// EndAfter keeps blocks whose End is after this time.
	EndAfter time.Time
}

// JournalFilter selects journals. Zero fields do not filter.
type JournalFilter struct {
	// Team keeps the journals with a posting reported under the team.
	Team string
	// Subject keeps the journals about a block (their Subject) or with a
	// posting on its escrow.
	Subject string
	// After keeps the journals with Seq > After; Limit caps how many are
	// returned (0: all).
	After int64
	Limit int
}

// Change is everything one decision writes. Blocks carry their placements;
// an allocation row is stored per (node, GPU index, block time range).
type Change struct {
	Insert      []core.Block
	Update      []BlockUpdate
	Idempotency []IdempotencyRecord
	// Journals are the movements of money the change causes. Commit
	// refuses the whole change when one does not balance (core.Journal
	// Check) and assigns each its Seq, in order.
	Journals []core.Journal
	Events   []core.Event
	Jobs     []JobWrite
	// InsertPlans stores new training plans: their own rows only, since
	// their segments are blocks of Insert with PlanID set. A duplicate
	// plan id is a conflict.
	InsertPlans []core.Plan
	// InsertSeries stores new series: their rows and which blocks are
	// their occurrences (the ids of Occurrences, blocks of Insert). A
	// duplicate series id is a conflict.
	InsertSeries []core.Series
	// InsertOrders stores new standing orders at Version 1; a duplicate
	// id is a conflict. UpdateOrders changes stored ones, each checked
	// against its expected version (a conflict when it moved).
	InsertOrders []core.Order
	UpdateOrders []OrderUpdate
	// Budgets make the commit check, for each guard, that the team's own
	// spending (core.Posting.Spending: charges less refunds, less credits
	// when the guard counts them) on its wallet with time at or after
	// Since, including this change's own journals, stays within Limit; if
	// not, Commit stores nothing and returns an error wrapping
	// core.ErrBudgetExceeded.
	Budgets []core.BudgetGuard
	// Audit are the audit records of the requests that made the change,
	// stored with it, so that a change is never durable without its
	// record; their Seq is assigned as by AppendAudit.
	Audit []core.AuditRecord
	// Offerings are the ids of the quotes (block, extension or plan
	// offerings, verified by the caller) that this change consumes: each
	// buys once. Commit stores the SHA-256 of each id with the quote's
	// expiry; an id already stored makes it store nothing and return an
	// error wrapping core.ErrOfferingUsed.
	Offerings []string
	// Actions are the engine actions that the change causes, stored
	// pending in its transaction (see Outbox): a decision is never
	// durable without them, nor they without it. A duplicate id is a
	// conflict. A zero NextAt is due at once.
	Actions []core.Action
	// NodeHealth records the health of nodes, each replacing the node's
	// stored record, so that a node's failure and the blocks it moves
	// commit together. A node twice in one change is invalid.
	NodeHealth []core.NodeHealth
	// Handovers stores hand-overs of blocks' hours (transfers, releases
	// for resale) and the resales of releases, each checked against its
	// expected version.
	Handovers []HandoverWrite
}

// BlockUpdate replaces a stored block's mutable fields (State, End, Name,
// Tags, Warned, Terminating, Fee) with those of Block. When Replace is true
// its allocations are replaced by Block.Placements over [Block.Start,
// Block.End), or over [From, Block.End) when From falls inside the block:
// the hours before From are past, and neither hold GPUs nor are checked
// again (a block moved while it runs holds its new GPUs from the move on).
// Otherwise, if End changed, the existing allocations are re-stored over
// the new range and re-checked. A block that leaves the live states keeps
// its allocation rows, but they no longer count as taken.
type BlockUpdate struct {
	Block           core.Block
	ExpectedVersion int64
	Replace         bool
	From            time.Time
}

// ReplacedFrom is the start of the allocations a replacing update stores
// for a block that starts at start and ends at end.
func (u BlockUpdate) ReplacedFrom(start, end time.Time) time.Time {
	if u.From.After(start) && u.From.Before(end) {
		return u.From
	}
	return start
}

// IdempotencyRecord remembers what a client token bought.
type IdempotencyRecord struct {
	Team        string
	ClientToken string
	RequestHash string
	Subject     string // the block (or plan) id
	CreatedAt   time.Time
}

// IsConflict reports whether err is a commit conflict.
func IsConflict(err error) bool { return errors.Is(err, core.ErrConflict) }
