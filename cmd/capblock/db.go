package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"capblock/internal/store"
	"capblock/internal/store/postgres"
	"capblock/internal/store/sqlite"
)

// openStore opens the store that --db names: a postgres:// or
// postgresql:// URL is a PostgreSQL database shared by replicas; anything
// else is the path of a SQLite file, created if missing.
func openStore(ctx context.Context, dsn string) (store.Full, error) {
	if isPostgresURL(dsn) {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, dsn)
}

// dbFromEnv is the database to open: the --db flag when given, else
// $CAPBLOCK_DB when set, else the flag's default. A URL with a password
// in the environment is seen by the server's user alone, while every
// process on the machine (a job's too) can read a command line.
func dbFromEnv(cmd *cobra.Command, flag string) string {
	if v := os.Getenv("CAPBLOCK_DB"); v != "" && !cmd.Flags().Changed("db") {
		return v
	}
	return flag
}

// isPostgresURL reports whether dsn is a PostgreSQL connection URL.
func isPostgresURL(dsn string) bool {
	lower := strings.ToLower(dsn)
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://")
}

// dbName is how the log names the database: a SQLite file's absolute path,
// or a PostgreSQL URL without its password.
func dbName(dsn string) string {
	if isPostgresURL(dsn) {
		return redactDSN(dsn)
	}
	abs, err := filepath.Abs(dsn)
	if err != nil {
		return dsn
	}
	return abs
}

// redactDSN hides the password of a PostgreSQL URL: secrets never reach
// the log.
func redactDSN(dsn string) string {
	if !isPostgresURL(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}
