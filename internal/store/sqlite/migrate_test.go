package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"capblock/internal/store/storetest"
)

// TestJournalsMigration upgrades a database whose money is a ledger of
// charges and refunds (migrations 0001 to 0016) to journals of postings
// (0017), and checks the result with storetest.CheckLedgerMigrated.
func TestJournalsMigration(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "capblock.db")
	db, err := sql.Open("sqlite", path+"?"+dsnParams(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	// 1. The schema of version 16, by the migrations' own code.
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 16 {
			break
		}
		if err := applyMigration(ctx, db, m); err != nil {
			t.Fatal(err)
		}
	}

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
	db, err := sql.Open("sqlite", path+"?"+dsnParams(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	// 1. The schema of version 17, by the migrations' own code.
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 17 {
			break
		}
		if err := applyMigration(ctx, db, m); err != nil {
			t.Fatal(err)
		}
	}

	// 2. Actions as version 17 stored them, in their order.
	for _, a := range storetest.ActionsV17() {
		if _, err := db.ExecContext(ctx, `INSERT INTO actions (`+actionColumns+`)
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
