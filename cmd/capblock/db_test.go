package main

import "testing"

func TestDatabaseNames(t *testing.T) {
	tests := map[string]struct {
		dsn      string
		postgres bool
		redacted string
	}{
		"sqlite file":         {"capblock.db", false, "capblock.db"},
		"postgres url":        {"postgres://cap:secret@db:5432/capblock?sslmode=disable", true, "postgres://cap:xxxxx@db:5432/capblock?sslmode=disable"},
		"postgresql, caps":    {"PostgreSQL://cap:secret@db/capblock", true, "postgresql://cap:xxxxx@db/capblock"},
		"file named postgres": {"postgres.db", false, "postgres.db"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := isPostgresURL(tc.dsn); got != tc.postgres {
				t.Errorf("isPostgresURL(%q) = %v", tc.dsn, got)
			}
			if got := redactDSN(tc.dsn); got != tc.redacted {
				t.Errorf("redactDSN(%q) = %q, want %q", tc.dsn, got, tc.redacted)
			}
		})
	}
}
