package sqlite

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/storetest"
)

// openAtVersion opens a new database at path with the schema of version
// v, applied by the migrations' own code, on one connection.
func openAtVersion(t *testing.T, path string, v int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?"+dsnParams(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > v {
			break
		}
		if err := applyMigration(t.Context(), db, m); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestJournalsMigration upgrades a database whose money is a ledger of
// charges and refunds (migrations 0001 to 0016) to journals of postings
// (0017), and checks the result with storetest.CheckLedgerMigrated.
func TestJournalsMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "capblock.db")
	// 1. The schema of version 16, by the migrations' own code.
	db := openAtVersion(t, path, 16)

	// 2. Blocks and ledger rows as version 16 wrote them.
	blocks, rows := storetest.LedgerV16()
	for _, b := range blocks {
		if _, err := db.ExecContext(ctx, `INSERT INTO blocks (id, name, team, instance_type, gpu_model, count, zone,
			start_time, end_time, state, fee_minor, fee_currency, created_at, tags, placements, warned, terminating, version)
			VALUES (?1, ?1, ?2, 'h100.8x', 'H100', 1, 'z', ?3, ?4, 'scheduled', 1, 'USD', ?3, '{}', '[]', 0, 0, 1)`,
			b.ID, b.Team, unixSeconds(b.Start), unixSeconds(b.End)); err != nil {
			t.Fatalf("inserting block %s: %v", b.ID, err)
		}
	}
	for _, r := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO ledger (id, team, time, kind, amount_minor, currency, subject,
			instance_type, on_demand_minor) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Team, unixSeconds(r.Time), r.Kind, r.Amount, r.Currency, r.Subject, r.InstanceType, r.OnDemand); err != nil {
			t.Fatalf("inserting ledger row %s: %v", r.ID, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// 3. Opening the store applies 0017.
	storetest.CheckLedgerMigrated(t, openTemp(t, path))
}

// TestLeasesMigration upgrades a database with pending actions
// (migrations 0001 to 0017) to the leader's lease and the actions' claims
// (0018), and checks the result with storetest.CheckLeasesMigrated.
func TestLeasesMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "capblock.db")
	// 1. The schema of version 17, by the migrations' own code.
	db := openAtVersion(t, path, 17)

	// 2. Actions as version 17 stored them, in their order.
	for _, a := range storetest.ActionsV17() {
		if _, err := db.ExecContext(ctx, `INSERT INTO actions (id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
			a.ID, string(a.Kind), a.Subject, a.Team, a.Payload, string(a.State), a.Attempts,
			unixMicros(a.NextAt), a.LastError, unixMicros(a.CreatedAt)); err != nil {
			t.Fatalf("inserting action %s: %v", a.ID, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// 3. Opening the store applies 0018.
	storetest.CheckLeasesMigrated(t, openTemp(t, path))
}

// TestAllocationsMigration upgrades a database whose allocations are
// kept for every block, live or not (migrations 0001 to 0018), to the
// live ones alone, keyed for the overlap probe (0019): a live block's
// GPUs stay held, a cancelled block's are free, and both can change.
func TestAllocationsMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "capblock.db")
	db := openAtVersion(t, path, 18)
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	// a holds n1's GPUs 0 and 1; c, cancelled, held n2's GPU 0.
	for _, q := range []string{
		`INSERT INTO blocks (id, name, team, instance_type, gpu_model, count, zone,
			start_time, end_time, state, fee_minor, fee_currency, created_at, tags, placements, warned, terminating, version)
			VALUES ('a', 'a', 't', 'x', 'H100', 1, 'z', ?1, ?2, 'scheduled', 1, 'USD', ?1, '{}', '[{"node":"n1","gpus":[0,1]}]', 0, 0, 1),
			       ('c', 'c', 't', 'x', 'H100', 1, 'z', ?1, ?2, 'cancelled', 1, 'USD', ?1, '{}', '[{"node":"n2","gpus":[0]}]', 0, 0, 1)`,
		`INSERT INTO allocations (block_id, node, gpu, start_time, end_time, live) VALUES
			('a', 'n1', 0, ?1, ?2, 1), ('a', 'n1', 1, ?1, ?2, 1), ('c', 'n2', 0, ?1, ?2, 0)`,
	} {
		if _, err := db.ExecContext(ctx, q, start.Unix(), start.Add(4*time.Hour).Unix()); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTemp(t, path) // applies 0019
	var rows int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM allocations`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("allocations after 0019: %d (%v), want a's 2", rows, err)
	}
	block := func(id, node string, gpu int) core.Block {
		return core.Block{ID: id, Name: id, Team: "t", InstanceType: "x", GPUModel: "H100", Count: 1, Zone: "z",
			Start: start.Add(time.Hour), End: start.Add(5 * time.Hour), State: core.StateScheduled,
			Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
			Placements: []core.Placement{{Node: node, GPUs: []int{gpu}}}}
	}
	if err := s.Commit(ctx, store.Change{Insert: []core.Block{block("d", "n1", 1)}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a block on a's GPU after 0019: %v, want a conflict", err)
	}
	if err := s.Commit(ctx, store.Change{Insert: []core.Block{block("e", "n2", 0)}}); err != nil {
		t.Fatalf("a block on cancelled c's GPU after 0019: %v", err)
	}
	// a, cancelled now, frees its GPUs.
	a, err := s.GetBlock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	version := a.Version
	a.State = core.StateCancelled
	if err := s.Commit(ctx, store.Change{Update: []store.BlockUpdate{{Block: a, ExpectedVersion: version}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, store.Change{Insert: []core.Block{block("d", "n1", 1)}}); err != nil {
		t.Fatalf("a block on cancelled a's GPU: %v", err)
	}
}
