package store

import (
	"context"
	"time"

	"capblock/internal/core"
)

// Accounts persists who may do what: teams, users, API tokens, access
// keys, quotas, budgets and the audit log. Every method is safe for concurrent use.
type Accounts interface {
	// CreateTeam stores a new team; a duplicate id or name is ErrConflict.
	CreateTeam(ctx context.Context, t core.Team) error
	// Teams lists every team, ordered by name.
	Teams(ctx context.Context) ([]core.Team, error)
	// Team returns one team, or ErrNotFound.
	Team(ctx context.Context, id string) (core.Team, error)
	// SetTeamDisabled disables a team at the given time, or enables it
	// when the time is zero; disabling twice keeps the first time. An
	// unknown id is ErrNotFound. A driver that replicas share tells their
	// watches (Notice.Accounts).
	SetTeamDisabled(ctx context.Context, id string, at time.Time) error

	// CreateUser stores a new user; a duplicate id or a user name already
	// used is ErrConflict, an unknown team ErrNotFound.
	CreateUser(ctx context.Context, u core.User) error
	// Users lists the users of a team ("" for all), ordered by name.
	Users(ctx context.Context, team string) ([]core.User, error)
	// User returns one user, or ErrNotFound.
	User(ctx context.Context, id string) (core.User, error)
	// SetUserDisabled is SetTeamDisabled for a user.
	SetUserDisabled(ctx context.Context, id string, at time.Time) error

	// CreateToken stores a token (its hash only); a duplicate id or hash
	// is ErrConflict, an unknown user ErrNotFound.
	CreateToken(ctx context.Context, t core.Token) error
	// TokenByHash returns the token with the given hash, or ErrNotFound.
	TokenByHash(ctx context.Context, hash string) (core.Token, error)
	// Token returns one token by id, or ErrNotFound.
	Token(ctx context.Context, id string) (core.Token, error)
	// Tokens lists the tokens of a user ("" for all), ordered by creation.
	Tokens(ctx context.Context, user string) ([]core.Token, error)
	// RevokeToken marks a token revoked at the given time; revoking twice
	// keeps the first time. An unknown id is ErrNotFound.
	RevokeToken(ctx context.Context, id string, at time.Time) error

	// CreateAccessKey stores an access key with its sealed secret (its
	// Team is not stored: it is read from the user); a duplicate id or
	// access key id is ErrConflict, an unknown user ErrNotFound.
	CreateAccessKey(ctx context.Context, k core.AccessKey) error
	// AccessKey returns one access key by id, with its user's team, or
	// ErrNotFound.
	AccessKey(ctx context.Context, id string) (core.AccessKey, error)
	// AccessKeyByKeyID returns the access key that AWS clients name
	// accessKeyID, or ErrNotFound.
	AccessKeyByKeyID(ctx context.Context, accessKeyID string) (core.AccessKey, error)
	// AccessKeys lists the access keys of a user ("" for all), ordered
	// by creation.
	AccessKeys(ctx context.Context, user string) ([]core.AccessKey, error)
	// RevokeAccessKey marks an access key revoked at the given time;
	// revoking twice keeps the first time. An unknown id is ErrNotFound.
	// A driver that replicas share tells their watches (Notice.Accounts),
	// as it does of a revoked token.
	RevokeAccessKey(ctx context.Context, id string, at time.Time) error

	// PutQuota stores a team's quota for an instance type ("" for all
	// types), replacing the one stored for that pair.
	PutQuota(ctx context.Context, q core.Quota) error
	// Quotas returns a team's quotas, the all-types row first, then by type.
	Quotas(ctx context.Context, team string) ([]core.Quota, error)

	// PutBudget stores a team's budget, replacing the previous one.
	PutBudget(ctx context.Context, b core.Budget) error
	// Budget returns a team's budget, or ErrNotFound when none was set.
	Budget(ctx context.Context, team string) (core.Budget, error)

	// TeamUID returns the uid under which the team's jobs run. The first
	// call allocates the lowest uid of [lo, hi] that no other team holds
	// and records it; later calls return the recorded one, whatever lo
	// and hi are then. Replicas calling it at once for one team agree on
	// one uid, and no two teams ever share one. A range with every uid
	// held is an error wrapping core.ErrNoCapacity; an unknown team
	// ErrNotFound; a range that is empty or holds uids below 1 (root) or
	// above 2^31-1 ErrInvalidArgument.
	TeamUID(ctx context.Context, team string, lo, hi int) (int, error)

	// AppendAudit stores one audit record; Seq is assigned.
	AppendAudit(ctx context.Context, r core.AuditRecord) error
	// Audit returns up to limit records with Seq > after, by Seq.
	Audit(ctx context.Context, after int64, limit int) ([]core.AuditRecord, error)
}

// Full is a driver with both the block store and the accounts.
type Full interface {
	Store
	Accounts
	Jobs
	Webhooks
	Plans
	SeriesOrders
	Outbox
	Leases
	Health
	Handovers
}

// Coordinator is implemented by drivers that several replicas share. A
// replica keeps its in-memory index current by watching what the others
// commit; which replica leads is the leader's lease's to say (Leases).
type Coordinator interface {
	// WatchBlocks reports, shortly after each commit of any replica and in
	// commit order, the blocks it changed, and whether it stored node
	// health or engine actions, until ctx ends. It starts with a Lost
	// notice once it listens, and sends another whenever it had to listen
	// again.
	WatchBlocks(ctx context.Context) <-chan Notice
	// Barrier sends a notice with token to every watch: each one receives
	// it after the notices of every commit that had ended when Barrier
	// was called.
	Barrier(ctx context.Context, token string) error
}

// Notice is what WatchBlocks reports: the blocks one commit changed, a
// barrier, that accounts, node health or actions changed, or that notices
// may have been lost. A notice says one of these; a commit that changes
// several sends several notices.
type Notice struct {
	// Blocks are the blocks a commit changed, at the versions it left.
	Blocks []BlockVersion
	// Barrier is the token of a Barrier call.
	Barrier string
	// Accounts says that tokens, quotas or budgets changed: forget what
	// was cached of them.
	Accounts bool
	// Health says that a commit stored node health: reload NodeHealth. It
	// comes before the notice of the blocks that commit changed, so that
	// a replica never places on a failed node the blocks it left.
	Health bool
	// Actions says that a commit stored engine actions: the outbox worker
	// may have work due, sooner than its next look.
	Actions bool
	// Clock says that a replica moved the simulated clock: read it again
	// (SimClock), so that every replica shows the same time.
	Clock bool
	// Lost says that notices may have been missed (the watch started or
	// reconnected): reload every block and the node health, look for due
	// actions, and forget cached accounts. Every commit after it comes as
	// a notice.
	Lost bool
}

// BlockVersion names a block at a version.
type BlockVersion struct {
	ID      string
	Version int64
	// Block, when set, returns the block at that version as the
	// committing replica holds it (decoding it only then); otherwise read
	// it from the store.
	Block func() (core.Block, error)
}
