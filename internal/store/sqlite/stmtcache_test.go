package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// openTestCached opens a pool on a fresh file, with one table t of the
// numbers 1 to 3, its connections keeping their statements.
func openTestCached(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openCached(filepath.Join(t.TempDir(), "cache.db") + "?" + dsnParams(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// kept is how many statements the pool's one connection keeps.
func kept(t *testing.T, db *sql.DB) int {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := 0
	if err := conn.Raw(func(dc any) error {
		c := dc.(*cachedConn)
		c.mu.Lock()
		defer c.mu.Unlock()
		n = c.lru.Len()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatementInUseIsNotShared: a query run again while the rows of the
// same text are still open (in one transaction, on one connection) gets
// a statement of its own, and both read every row.
func TestStatementInUseIsNotShared(t *testing.T) {
	db := openTestCached(t)
	ctx := t.Context()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	const q = `SELECT n FROM t ORDER BY n`
	outer, err := tx.QueryContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for outer.Next() {
		var n int
		if err := outer.Scan(&n); err != nil {
			t.Fatal(err)
		}
		inner, err := tx.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		m := 0
		for inner.Next() {
			m++
		}
		if err := inner.Close(); err != nil {
			t.Fatal(err)
		}
		if m != 3 {
			t.Errorf("the inner query read %d rows, want 3", m)
		}
		got = append(got, n)
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("the outer query read %v, want [1 2 3]", got)
	}
}

// TestStatementCacheIsBounded: a connection keeps at most stmtCacheSize
// statements, and one it evicted compiles again when asked for.
func TestStatementCacheIsBounded(t *testing.T) {
	db := openTestCached(t)
	ctx := context.Background()
	for i := range stmtCacheSize + 40 {
		var n int
		if err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) + %d FROM t`, i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 3+i {
			t.Fatalf("query %d answered %d, want %d", i, n, 3+i)
		}
	}
	if n := kept(t, db); n != stmtCacheSize {
		t.Errorf("the connection keeps %d statements, want %d", n, stmtCacheSize)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) + 0 FROM t`).Scan(&n); err != nil || n != 3 {
		t.Errorf("the first query, evicted, again: %d, %v; want 3", n, err)
	}
}

// TestStatementsSeeSchemaChanges: a kept statement compiled before a
// column was added reads the table as it is now.
func TestStatementsSeeSchemaChanges(t *testing.T) {
	db := openTestCached(t)
	ctx := t.Context()
	const q = `SELECT * FROM t LIMIT 1`
	cols := func() int {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cs, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	if n := cols(); n != 1 {
		t.Fatalf("t has %d columns, want 1", n)
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE t ADD COLUMN m INTEGER`); err != nil {
		t.Fatal(err)
	}
	if n := cols(); n != 2 {
		t.Errorf("after a column was added, the kept statement reads %d columns, want 2", n)
	}
}
