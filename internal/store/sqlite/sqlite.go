// Package sqlite is the embedded driver of capblock's store: one SQLite file
// in WAL mode, written by a single connection in BEGIN IMMEDIATE
// transactions and read through a separate pool that never waits for the
// writer. Commits are durable (synchronous=FULL): an acknowledged Commit
// survives a crash of the process or the machine.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"capblock/internal/core"
	"capblock/internal/store"
)

// busyTimeoutMillis is how long a connection waits for a lock held by
// another process (another capblock on the same file, a backup) before it
// gives up.
const busyTimeoutMillis = 5000

// Store is a store.Store on one SQLite file.
type Store struct {
	path string
	// w is the single writer connection: every Commit and every other write
	// goes through it, so writes never contend for SQLite's write lock
	// inside this process.
	w *sql.DB
	// r is the read pool; in WAL mode readers see the last committed state
	// without waiting for the writer.
	r *sql.DB

	ws *writeStmts
	rs *readStmts
	// group queues the commits that arrive while one is written.
	group *store.CommitGroup[*store.CommitRequest]

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and applies the
// migrations it does not have yet.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") || path == ":memory:" {
		return nil, fmt.Errorf("opening sqlite store: unsupported path %q (a plain file name without '?' or '#' is needed)", path)
	}
	s := &Store{path: path, group: store.NewCommitGroup[*store.CommitRequest](maxGroup, 1)}
	var err error
	// 1. The writer: its first connection turns the file to WAL and runs the
	//    migrations before any reader opens it.
	s.w, err = openCached(path + "?" + dsnParams(true))
	if err != nil {
		return nil, fmt.Errorf("opening sqlite writer on %s: %w", path, err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := pingWriter(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("connecting to sqlite database %s: %w", path, err)
	}
	if err := migrate(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("migrating sqlite database %s: %w", path, err)
	}
	// 2. The read pool.
	s.r, err = openCached(path + "?" + dsnParams(false))
	if err != nil {
		s.w.Close()
		return nil, fmt.Errorf("opening sqlite readers on %s: %w", path, err)
	}
	readers := max(4, runtime.NumCPU())
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	s.r.SetConnMaxLifetime(0)
	s.r.SetConnMaxIdleTime(0)
	// 3. Statements that every call uses, prepared once.
	if s.ws, err = prepareWriteStmts(ctx, s.w); err == nil {
		s.rs, err = prepareReadStmts(ctx, s.r)
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("preparing statements on %s: %w", path, err)
	}
	return s, nil
}

// pingWriter opens the writer's connection. Turning a new file to WAL
// takes an exclusive lock that SQLite's busy handler does not wait for, so
// two processes opening a new file at once may see SQLITE_BUSY here: retry
// for as long as the busy timeout would have waited.
func pingWriter(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(busyTimeoutMillis * time.Millisecond)
	for {
		err := w.PingContext(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isBusy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// dsnParams returns the connection parameters of the writer or of a reader.
func dsnParams(writer bool) string {
	p := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMillis),
		"_pragma=foreign_keys(1)",
	}
	if writer {
		p = append(p,
			"_pragma=journal_mode(WAL)",
			// FULL syncs the WAL on every commit: NORMAL would lose the
			// last commits on a power cut.
			"_pragma=synchronous(FULL)",
			// Savepoints' journals (one per change of a group) stay in
			// memory, never in a file of their own.
			"_pragma=temp_store(MEMORY)",
			// The writer's page cache holds the tables' and indexes'
			// hot pages (64 MiB at most; the default is 2 MiB) rather
			// than reading them again from the file at every commit.
			"_pragma=cache_size(-65536)",
			// A checkpoint every 8,000 pages of WAL (about 32 MiB)
			// rather than every 1,000: a page that many commits change
			// (an index's last leaf) is copied into the file once per
			// checkpoint, not once per few commits, and restarts read at
			// most that much WAL.
			"_pragma=wal_autocheckpoint(8000)",
			"_txlock=immediate",
		)
	} else {
		p = append(p, "_pragma=query_only(1)")
	}
	return strings.Join(p, "&")
}

// Path returns the database file's name.
func (s *Store) Path() string { return s.path }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("pinging sqlite database %s: %w", s.path, err)
	}
	return nil
}

// Close closes the database. Calling it again does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.ws != nil {
			errs = append(errs, s.ws.close())
		}
		if s.rs != nil {
			errs = append(errs, s.rs.close())
		}
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("closing sqlite database %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Secret returns the signing secret as stored, if one is.
func (s *Store) Secret(ctx context.Context) (store.SigningSecret, bool, error) {
	var stored []byte
	err := s.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'secret'`).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return store.SigningSecret{}, false, nil
	}
	if err != nil {
		return store.SigningSecret{}, false, fmt.Errorf("reading the signing secret: %w", err)
	}
	secret, err := store.DecodeSigningSecret(stored)
	return secret, err == nil, err
}

// InitSecret stores secret unless one exists, and returns the stored one;
// the insert and the read share one write transaction, so two processes
// opening a new file agree on the same secret.
func (s *Store) InitSecret(ctx context.Context, secret store.SigningSecret) (store.SigningSecret, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.SigningSecret{}, fmt.Errorf("beginning the signing secret's transaction: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO meta (key, value) VALUES ('secret', ?) ON CONFLICT (key) DO NOTHING`, store.EncodeSigningSecret(secret)); err != nil {
		return store.SigningSecret{}, fmt.Errorf("storing the signing secret: %w", err)
	}
	var stored []byte
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'secret'`).Scan(&stored); err != nil {
		return store.SigningSecret{}, fmt.Errorf("reading the signing secret: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.SigningSecret{}, fmt.Errorf("committing the signing secret: %w", err)
	}
	return store.DecodeSigningSecret(stored)
}

// SealSecret replaces the clear signing secret with its sealed form, only
// if the stored secret is still that clear one. SQLite leaves what an
// update replaced in the file's free space and in the write-ahead log, so
// the update runs with secure_delete (the clear secret's bytes are
// zeroed), and the log is then checkpointed and truncated: the clear
// secret is gone from the files, unless a reader held the log meanwhile
// (it then goes at a later checkpoint).
func (s *Store) SealSecret(ctx context.Context, clear []byte, sealed core.SealedSecret) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sealing the signing secret: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return fmt.Errorf("sealing the signing secret: %w", err)
	}
	res, err := conn.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'secret' AND value = ?`,
		store.EncodeSigningSecret(store.SigningSecret{Sealed: sealed}), clear)
	if _, offErr := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA secure_delete = OFF`); err == nil && offErr != nil {
		err = offErr
	}
	if err != nil {
		return fmt.Errorf("sealing the signing secret: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sealing the signing secret: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("sealing the signing secret: it is not stored in clear: %w", store.ErrConflict)
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpointing the database after sealing the signing secret: %w", err)
	}
	return nil
}

// Collectors returns the store's metrics: the sizes of its commits'
// groups.
func (s *Store) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.group.Collector()}
}
