package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"capblock/internal/store"
	"capblock/internal/store/storetest"
)

// harness opens each store on a new file in the test's temporary folder.
func harness() storetest.Harness {
	return storetest.Harness{
		Open: func(t *testing.T) store.Full {
			return openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
		},
		Reopen: func(t *testing.T, s store.Full) store.Full {
			path := s.(*Store).Path()
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return openTemp(t, path)
		},
		Replica: func(t *testing.T, s store.Full) store.Full {
			return openTemp(t, s.(*Store).Path())
		},
	}
}

func openTemp(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Exercise(t, harness())
}

func TestMigrationsAppliedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capblock.db")
	want, err := migrations()
	if err != nil {
		t.Fatalf("migrations: %v", err)
	}
	// Two stores opening the same new file at once, then a third later.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { openTemp(t, path) })
	}
	wg.Wait()
	s := openTemp(t, path)
	rows, err := s.r.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	defer rows.Close()
	var got []store.Migration
	for rows.Next() {
		var m store.Migration
		if err := rows.Scan(&m.Version, &m.Name); err != nil {
			t.Fatalf("reading schema_migrations: %v", err)
		}
		got = append(got, m)
	}
	if len(got) != len(want) {
		t.Fatalf("schema_migrations has %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Version != want[i].Version || got[i].Name != want[i].Name {
			t.Errorf("migration %d: got %d %s, want %d %s", i, got[i].Version, got[i].Name, want[i].Version, want[i].Name)
		}
	}
	if want[0].Name != "0001_init" {
		t.Errorf("first migration is %s, want 0001_init", want[0].Name)
	}
}

func TestPragmas(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	tests := map[string]string{
		"journal_mode": "wal",
		"synchronous":  "2", // FULL
		"foreign_keys": "1",
		"busy_timeout": "5000",
	}
	for pragma, want := range tests {
		var got string
		if err := s.w.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
	// Readers cannot write.
	if _, err := s.r.ExecContext(t.Context(), `INSERT INTO meta (key, value) VALUES ('x', 'y')`); err == nil {
		t.Errorf("a reader connection could write")
	}
}

// TestOverlapQueryUsesIndexes guards the commit's speed: the overlap
// re-check seeks each of the block's rows by its key and, for each, the
// first end after its start on the GPU and the rows ending then; it never
// scans a table, never sorts, and never reads every later allocation of
// the GPU (a join on end_time > start would). So do the statements that
// change a block's rows.
func TestOverlapQueryUsesIndexes(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	args := []any{"b1", 100, "n1", 0, "n1", 1}
	plans := map[allocKind][]string{
		allocOverlap: {
			"SEARCH a USING PRIMARY KEY (node=? AND gpu=? AND end_time=? AND block_id=?)",
			"SEARCH o USING PRIMARY KEY (node=? AND gpu=? AND end_time=?)",
			"CORRELATED SCALAR SUBQUERY",
			"SEARCH n USING PRIMARY KEY (node=? AND gpu=? AND end_time>?)",
		},
		allocDelete: {"SEARCH allocations USING PRIMARY KEY (node=? AND gpu=? AND end_time=? AND block_id=?)"},
		allocEnd:    {"SEARCH allocations USING PRIMARY KEY (node=? AND gpu=? AND end_time=? AND block_id=?)"},
	}
	for kind, wants := range plans {
		a := args
		if kind == allocEnd {
			a = []any{"b1", 100, 200, "n1", 0, "n1", 1}
		}
		text := queryPlan(t, s, allocSQL[kind][2], a...)
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("plan of %s lacks %q:\n%s", allocSQL[kind][2], want, text)
			}
		}
		for _, bad := range []string{"SCAN allocations", "SCAN a", "SCAN o", "SCAN n", "TEMP B-TREE"} {
			if strings.Contains(text, bad) {
				t.Errorf("plan of %s has %q:\n%s", allocSQL[kind][2], bad, text)
			}
		}
	}
}

// TestDueActionsQueryUsesIndexes guards the outbox worker's cost: the
// due actions are read from the pending ones in order, up to the limit,
// and each one's older pending actions are sought by subject; nothing is
// scanned or sorted. A claim reads them so, and updates each by its key.
func TestDueActionsQueryUsesIndexes(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	for name, text := range map[string]string{
		"due actions":   queryPlan(t, s, dueActionsSQL, 0, 10),
		"claim actions": queryPlan(t, s, claimActionsSQL, 0, 10, 1),
	} {
		want := []string{"SEARCH a USING INDEX actions_due (next_at<?)",
			"SEARCH o USING INDEX actions_by_subject (subject=? AND seq<?)"}
		if name == "claim actions" {
			want = append(want, "SEARCH actions USING INTEGER PRIMARY KEY (rowid=?)")
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s query plan lacks %q:\n%s", name, w, text)
			}
		}
		for _, bad := range []string{"SCAN", "TEMP B-TREE"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s query plan has %q:\n%s", name, bad, text)
			}
		}
	}
}

// queryPlan returns the lines of EXPLAIN QUERY PLAN of query with args.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatalf("EXPLAIN: %v", err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	return strings.Join(plan, "\n")
}

func TestOpenRefusesURIs(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro", "x#y.db"} {
		if s, err := Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want an error", path)
		}
	}
}

// TestReadsDoNotWaitForWriter reads while a write transaction is open: WAL
// readers see the last committed state at once.
func TestReadsDoNotWaitForWriter(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	if err := s.Commit(t.Context(), storetest.PurchaseChange(0)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	tx, err := s.w.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(t.Context(), `UPDATE blocks SET name = 'uncommitted'`); err != nil {
		t.Fatalf("UPDATE: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatalf("ListBlocks during a write: %v", err)
	}
	if len(blocks) != 1 || blocks[0].Name != "bench" {
		t.Fatalf("ListBlocks during a write = %+v, want the committed block", blocks)
	}
}
