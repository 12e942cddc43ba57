package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"capblock/internal/store"
	"capblock/internal/store/postgres"
	"capblock/internal/store/sqlite"
)

// migrateCmd is `capblock migrate status|apply`: the schema of the
// database, which `capblock serve` also brings up to date at start.
func (a *app) migrateCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Show or apply the database's schema migrations",
		Long: `Show or apply the database's schema migrations.

"capblock serve" applies missing migrations at start (under a lock, so
replicas starting together do not race); "migrate apply" does it ahead of a
deployment, and "migrate status" shows what a database has without
changing it.`,
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether the database has them (changes nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db = dbFromEnv(cmd, db)
			states, err := migrationStates(cmd.Context(), db)
			if err != nil {
				return err
			}
			return a.printMigrations(states)
		},
	}
	apply := &cobra.Command{
		Use:   "apply",
		Short: "Apply the migrations the database lacks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db = dbFromEnv(cmd, db)
			st, err := openStore(cmd.Context(), db)
			if err != nil {
				return fmt.Errorf("migrating %s: %w", redactDSN(db), err)
			}
			st.Close()
			states, err := migrationStates(cmd.Context(), db)
			if err != nil {
				return err
			}
			return a.printMigrations(states)
		},
	}
	for _, c := range []*cobra.Command{status, apply} {
		c.Flags().StringVar(&db, "db", "capblock.db", "SQLite database file, or a postgres:// URL (or $CAPBLOCK_DB)")
	}
	cmd.AddCommand(status, apply)
	return cmd
}

func migrationStates(ctx context.Context, db string) ([]store.MigrationState, error) {
	var (
		states []store.MigrationState
		err    error
	)
	if isPostgresURL(db) {
		states, err = postgres.Migrations(ctx, db)
	} else {
		states, err = sqlite.Migrations(ctx, db)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the migrations of %s: %w", redactDSN(db), err)
	}
	return states, nil
}

func (a *app) printMigrations(states []store.MigrationState) error {
	if a.jsonOutput() {
		out := make([]map[string]any, len(states))
		for i, s := range states {
			out[i] = map[string]any{"version": s.Version, "name": s.Name, "applied": s.Applied}
		}
		return a.printJSON(map[string]any{"migrations": out})
	}
	t := a.newTable("VERSION", "NAME", "STATE")
	pending := 0
	for _, s := range states {
		state := "applied"
		if !s.Applied {
			state = "pending"
			pending++
		}
		t.row(strconv.Itoa(s.Version), s.Name, state)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if pending > 0 {
		a.note("%d pending: 'capblock migrate apply' (or starting 'capblock serve') applies them", pending)
	}
	return nil
}
