package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"capblock/internal/store"
)

// migrationFiles are the schema migrations, numbered 0001_name.sql,
// 0002_name.sql, …, the same numbers and names as the sqlite driver's; each
// is applied once, in order. A migration is never edited once released: a
// change is a new file, for both engines.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the embedded migrations sorted by version.
func migrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFiles, "migrations")
}

// migrate applies the migrations that the database lacks, all in one
// transaction that first takes an advisory lock: replicas starting
// together wait for each other, and the one that comes second finds the
// first one's work recorded in schema_migrations. A failure leaves the
// database as it was (PostgreSQL's DDL is transactional).
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning migrations: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// A replica starting beside another waits for its migrations however
	// long they take, not the store's usual lock timeout.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 0`); err != nil {
		return fmt.Errorf("beginning migrations: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		// Without arguments pgx sends the file as one simple query, which
		// may hold several statements.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("applying migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx,
			`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("recording migration %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing migrations: %w", err)
	}
	return nil
}

// querier is a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func appliedVersions(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("reading schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("reading schema_migrations: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}
	return applied, nil
}

// Migrations reports the embedded migrations and which of them the
// database at dsn has applied, without applying any.
func Migrations(ctx context.Context, dsn string) ([]store.MigrationState, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("looking for schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	if exists {
		if applied, err = appliedVersions(ctx, conn); err != nil {
			return nil, err
		}
	}
	return store.States(ms, applied), nil
}
