package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMigrate: status on a new file lists every migration pending and
// creates nothing; apply applies them; status then shows them applied.
func TestMigrate(t *testing.T) {
	db := filepath.Join(t.TempDir(), "capblock.db")
	got := runApp(t.Context(), nil, "migrate", "status", "--db", db)
	if got.code != 0 || !migrationLine("0001_init", "pending").MatchString(got.stdout) || strings.Contains(got.stdout, "applied") {
		t.Fatalf("status of a new file: %+v", got)
	}
	if !strings.Contains(got.stderr, "pending: 'capblock migrate apply'") {
		t.Errorf("status does not say how to apply: %q", got.stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatal("status created the database file")
	}
	if got := runApp(t.Context(), nil, "migrate", "status", "--db", db); got.code != 0 {
		t.Fatalf("second status: %+v", got)
	}
	got = runApp(t.Context(), nil, "migrate", "apply", "--db", db)
	if got.code != 0 || strings.Contains(got.stdout, "pending") || !migrationLine("0001_init", "applied").MatchString(got.stdout) {
		t.Fatalf("apply: %+v", got)
	}
	got = runApp(t.Context(), nil, "migrate", "status", "--db", db, "-o", "json")
	if got.code != 0 || !strings.Contains(got.stdout, `"applied": true`) || strings.Contains(got.stdout, `"applied": false`) {
		t.Fatalf("status after apply: %+v", got)
	}
}

// TestMigrateDBFromEnv: $CAPBLOCK_DB names the database when --db is not
// given (a password in it stays out of the process list); --db wins.
func TestMigrateDBFromEnv(t *testing.T) {
	dir := t.TempDir()
	fromEnv, fromFlag := filepath.Join(dir, "env.db"), filepath.Join(dir, "flag.db")
	t.Setenv("CAPBLOCK_DB", fromEnv)
	if got := runApp(t.Context(), nil, "migrate", "apply"); got.code != 0 {
		t.Fatalf("apply on $CAPBLOCK_DB: %+v", got)
	}
	if _, err := os.Stat(fromEnv); err != nil {
		t.Fatalf("$CAPBLOCK_DB was not used: %v", err)
	}
	if got := runApp(t.Context(), nil, "migrate", "apply", "--db", fromFlag); got.code != 0 {
		t.Fatalf("apply on --db: %+v", got)
	}
	if _, err := os.Stat(fromFlag); err != nil {
		t.Fatalf("--db did not win over $CAPBLOCK_DB: %v", err)
	}
}

// migrationLine matches a migration's line of `migrate status`, however
// wide its name column is.
func migrationLine(name, state string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)\b` + regexp.QuoteMeta(name) + ` +` + state + `$`)
}
