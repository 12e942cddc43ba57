package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"capblock/internal/store"
)

// migrationFiles are the schema migrations, numbered 0001_name.sql,
// 0002_name.sql, …; each is applied once, in order, in its own transaction.
// A migration is never edited once released: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the embedded migrations sorted by version.
func migrations() ([]store.Migration, error) {
	return store.LoadMigrations(migrationFiles, "migrations")
}

// migrate applies the migrations that the database lacks. Each runs in one
// BEGIN IMMEDIATE transaction together with its schema_migrations row, so a
// crash leaves either all of a migration or none of it, and two processes
// opening the same new file do not both apply it.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	// A database opened again has every migration: one read says so,
	// where a transaction per migration would take the write lock 18
	// times at each start. A migration not yet recorded is applied in
	// its own transaction, which checks again under the lock.
	applied, err := appliedMigrations(ctx, db)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := applyMigration(ctx, db, m); err != nil {
			return err
		}
	}
	return nil
}

// appliedMigrations reads the versions schema_migrations records.
func appliedMigrations(ctx context.Context, db *sql.DB) (map[int]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("reading the applied migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("reading the applied migrations: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the applied migrations: %w", err)
	}
	return applied, nil
}

// applyMigration applies m unless it is already recorded.
func applyMigration(ctx context.Context, db *sql.DB, m store.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning migration %s: %w", m.Name, err)
	}
	defer tx.Rollback()
	var applied int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&applied); err != nil {
		return fmt.Errorf("checking migration %s: %w", m.Name, err)
	}
	if applied > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("applying migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().Unix()); err != nil {
		return fmt.Errorf("recording migration %s: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing migration %s: %w", m.Name, err)
	}
	return nil
}

// Migrations reports the embedded migrations and which of them the
// database file at path has applied, without applying any (a missing file
// has none).
func Migrations(ctx context.Context, path string) ([]store.MigrationState, error) {
	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	applied := map[int]bool{}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return store.States(ms, applied), nil
	}
	db, err := sql.Open("sqlite", path+"?mode=ro&"+dsnParams(false))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return store.States(ms, applied), nil
		}
		return nil, fmt.Errorf("reading schema_migrations of %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("reading schema_migrations of %s: %w", path, err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading schema_migrations of %s: %w", path, err)
	}
	return store.States(ms, applied), nil
}
