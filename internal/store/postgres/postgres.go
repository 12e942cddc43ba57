// Package postgres is the driver of capblock's store for several replicas
// sharing one PostgreSQL database (pgx, through a connection pool).
//
// It behaves as the sqlite driver does, which the storetest conformance
// suite checks, and relies on the database where replicas could race:
//   - allocations are one row per (block, node), holding the set of that
//     node's GPUs the block has there over its time range, nodes by
//     number, and an exclusion constraint refuses two live rows that share
//     a GPU at the same time, whatever the application does; checked at
//     COMMIT, it is also the commit's overlap check;
//   - a commit runs in one READ COMMITTED transaction that locks the blocks
//     it updates and the nodes whose allocations it writes, before writing
//     (always in the same order, so commits on one node run one after the
//     other and never wait for each other in a cycle), and re-checks the
//     versions of the blocks it updates on fresh data;
//   - a commit with a budget guard locks its team before it sums the
//     team's spend, so two guarded purchases never both spend the rest;
//   - events (and audit records) take their seq and commit while holding
//     a shared lock that Events (Audit) takes exclusively, so a reader
//     never sees a seq before the smaller ones of commits still in flight,
//     and never skips them;
//   - the migrations are applied at Open under an advisory lock, so
//     replicas that start together apply each exactly once.
package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Advisory lock keys. The migration lock is in the one-bigint key space of
// pg_advisory_xact_lock; the others are (class, key) pairs in the two-int
// space, which PostgreSQL keeps apart from the first.
const (
	migrationLock  int64 = 0x6361_7062_6c6f_636b // "capblock"
	nodeLockClass  int32 = 0x6362_0001           // key: lockKey(node)
	eventLockClass int32 = 0x6362_0002           // key: 0
	teamLockClass  int32 = 0x6362_0003           // key: lockKey(team), for budget guards
	auditLockClass int32 = 0x6362_0004           // key: 0
)

// lockTimeout bounds every lock wait of the store's sessions.
const lockTimeout = "2s"

// idleInTransaction bounds how long a session may sit in a transaction
// without sending a statement: capblock's transactions never wait on
// their client for more than milliseconds.
const idleInTransaction = "5s"

// Store is a store.Full (blocks and accounts) on one PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// retries counts transactions the database aborted (serialization
	// failures, deadlocks) that Commit ran again.
	retries prometheus.Counter
	// group queues the commits that arrive while one is written.
	group *store.CommitGroup[*store.CommitRequest]
}

var _ store.Store = (*Store)(nil)

// Open connects to the database that dsn names (a postgres:// URL or a
// "key=value" string that pgx accepts) and applies the migrations it does
// not have yet.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing PostgreSQL connection string: %w", err)
	}
	// No statement waits for a lock without end: a wait that a cycle
	// through several locks (advisory locks, a deferred exclusion check,
	// the events lock's queue) keeps from ending fails after lockTimeout
	// and the transaction is run again (see retryable).
	if _, set := cfg.ConnConfig.RuntimeParams["lock_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["lock_timeout"] = lockTimeout
	}
	// No transaction holds its locks for a process that stopped in the
	// middle of it (paused, or cut off without its connection closing):
	// PostgreSQL ends a session idle in a transaction after
	// idleInTransaction. A leader paused between the check of its lease
	// (FOR SHARE) and its commit would otherwise keep every other
	// replica from taking the lease until its connection died.
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = idleInTransaction
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening PostgreSQL pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL database %s on %s: %w",
			cfg.ConnConfig.Database, cfg.ConnConfig.Host, err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating PostgreSQL database %s: %w", cfg.ConnConfig.Database, err)
	}
	return &Store{pool: pool, group: store.NewCommitGroup[*store.CommitRequest](maxGroup, groupWriters), retries: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "capblock_store_transaction_retries_total",
		Help: "Transactions that PostgreSQL aborted (serialization failure, deadlock) and capblock ran again.",
	})}, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging PostgreSQL: %w", err)
	}
	return nil
}

// Close closes the pool's connections, waiting for those in use to come
// back. Calling it again does nothing.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Secret returns the signing secret as stored, if one is.
func (s *Store) Secret(ctx context.Context) (store.SigningSecret, bool, error) {
	var stored []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'secret'`).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.SigningSecret{}, false, nil
	}
	if err != nil {
		return store.SigningSecret{}, false, fmt.Errorf("reading the signing secret: %w", err)
	}
	secret, err := store.DecodeSigningSecret(stored)
	return secret, err == nil, err
}

// InitSecret stores secret unless one exists, and returns the stored one.
// Replicas starting together agree: an INSERT racing another waits for it
// and then does nothing, and the SELECT that follows, a statement of its
// own, sees the row that won.
func (s *Store) InitSecret(ctx context.Context, secret store.SigningSecret) (store.SigningSecret, error) {
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO meta (key, value) VALUES ('secret', $1) ON CONFLICT (key) DO NOTHING`, store.EncodeSigningSecret(secret)); err != nil {
		return store.SigningSecret{}, fmt.Errorf("storing the signing secret: %w", err)
	}
	var stored []byte
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'secret'`).Scan(&stored); err != nil {
		return store.SigningSecret{}, fmt.Errorf("reading the signing secret: %w", err)
	}
	return store.DecodeSigningSecret(stored)
}

// SealSecret replaces the clear signing secret with its sealed form, only
// if the stored secret is still that clear one.
func (s *Store) SealSecret(ctx context.Context, clear []byte, sealed core.SealedSecret) error {
	tag, err := s.pool.Exec(ctx, `UPDATE meta SET value = $1 WHERE key = 'secret' AND value = $2`,
		store.EncodeSigningSecret(store.SigningSecret{Sealed: sealed}), clear)
	if err != nil {
		return fmt.Errorf("sealing the signing secret: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sealing the signing secret: it is not stored in clear: %w", store.ErrConflict)
	}
	return nil
}

// Collectors returns the store's metrics: its connection pool and its
// transaction retries.
func (s *Store) Collectors() []prometheus.Collector {
	gauge := func(name, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(s.pool.Stat()) })
	}
	counter := func(name, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(s.pool.Stat()) })
	}
	return []prometheus.Collector{
		s.retries,
		s.group.Collector(),
		gauge("capblock_db_pool_connections", "Connections in the PostgreSQL pool.", func(st *pgxpool.Stat) float64 { return float64(st.TotalConns()) }),
		gauge("capblock_db_pool_connections_in_use", "Pool connections in use.", func(st *pgxpool.Stat) float64 { return float64(st.AcquiredConns()) }),
		gauge("capblock_db_pool_connections_idle", "Idle pool connections.", func(st *pgxpool.Stat) float64 { return float64(st.IdleConns()) }),
		gauge("capblock_db_pool_max_connections", "The pool's size limit.", func(st *pgxpool.Stat) float64 { return float64(st.MaxConns()) }),
		counter("capblock_db_pool_acquires_total", "Connections taken from the pool.", func(st *pgxpool.Stat) float64 { return float64(st.AcquireCount()) }),
		counter("capblock_db_pool_empty_acquires_total", "Takes that had to wait for a connection.", func(st *pgxpool.Stat) float64 { return float64(st.EmptyAcquireCount()) }),
		counter("capblock_db_pool_acquire_seconds_total", "Time spent waiting for pool connections.", func(st *pgxpool.Stat) float64 { return st.AcquireDuration().Seconds() }),
	}
}
