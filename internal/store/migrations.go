package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change of a driver, from a file named
// NNNN_what.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// MigrationState is a migration and whether a database has applied it.
type MigrationState struct {
	Version int
	Name    string
	Applied bool
}

// LoadMigrations reads the *.sql files of dir in fsys (a driver's embedded
// migrations), sorted by version; names must start with a unique positive
// number and "_".
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, fmt.Errorf("listing migrations: %w", err)
	}
	var ms []Migration
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, base, version)
		}
		seen[version] = base
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", base, err)
		}
		ms = append(ms, Migration{Version: version, Name: strings.TrimSuffix(base, ".sql"), SQL: string(text)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// States pairs migrations with the versions a database has applied.
func States(ms []Migration, applied map[int]bool) []MigrationState {
	out := make([]MigrationState, len(ms))
	for i, m := range ms {
		out[i] = MigrationState{Version: m.Version, Name: m.Name, Applied: applied[m.Version]}
	}
	return out
}
