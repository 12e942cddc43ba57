package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/storetest"
)

// TestNodeIDsMigration upgrades a database that allocations on node names
// (migrations 0001 to 0006) to node numbers (0007) and then to one row
// per block and node (0019): every row keeps its node and GPUs, the
// exclusion constraint still refuses overlaps, and later commits reuse
// the numbers.
func TestNodeIDsMigration(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= 7 {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("applying %s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	// Two blocks as 0006 stored them: a on n2 GPUs 0-1, b on n1 GPU 0 and n2 GPU 2.
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO blocks (` + blockColumns + `) VALUES
			('a', 'a', 't', 'x', 'H100', 1, 'z', $1, $2, 'scheduled', 1, 'USD', $1, '{}', '[]', false, false, 1),
			('b', 'b', 't', 'x', 'H100', 1, 'z', $1, $2, 'scheduled', 1, 'USD', $1, '{}', '[]', false, false, 1)`,
		`INSERT INTO allocations (block_id, node, gpu, during, live) VALUES
			('a', 'n2', 0, tstzrange($1, $2), true), ('a', 'n2', 1, tstzrange($1, $2), true),
			('b', 'n1', 0, tstzrange($1, $2), true), ('b', 'n2', 2, tstzrange($1, $2), true)`,
	} {
		if _, err := conn.Exec(ctx, q, start, start.Add(4*time.Hour)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	s := openTemp(t, dsn) // applies 0007 and the rest
	rows, err := conn.Query(ctx, `SELECT a.block_id || '/' || n.name || '/' || a.gpus::text
		FROM allocations a JOIN nodes n ON n.id = a.node ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/n2/{[0,2)}", "b/n1/{[0,1)}", "b/n2/{[2,3)}"}
	if len(got) != len(want) {
		t.Fatalf("allocations after the migrations: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocations after the migrations: %v, want %v", got, want)
		}
	}

	block := func(id, node string, gpu int, from int) core.Block {
		return core.Block{ID: id, Name: id, Team: "t", InstanceType: "x", GPUModel: "H100", Count: 1, Zone: "z",
			Start: start.Add(time.Duration(from) * time.Hour), End: start.Add(time.Duration(from+4) * time.Hour),
			State: core.StateScheduled, Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
			Placements: []core.Placement{{Node: node, GPUs: []int{gpu}}}}
	}
	// n1's GPU 0 is b's until hour 4.
	err = s.Commit(ctx, store.Change{Insert: []core.Block{block("c", "n1", 0, 2)}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("overlapping b on a migrated allocation: got %v, want a conflict", err)
	}
	if err := s.Commit(ctx, store.Change{Insert: []core.Block{block("d", "n1", 0, 4), block("e", "n3", 0, 0)}}); err != nil {
		t.Fatalf("Commit after b, and on a new node: %v", err)
	}
	var nodes int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM nodes`).Scan(&nodes); err != nil || nodes != 3 {
		t.Fatalf("nodes after the commits: %d (%v), want 3 (n1 and n2 kept their numbers, n3 is new)", nodes, err)
	}
}

// TestAllocationsNeedNodeNumbers checks that a commit never drops the
// allocation rows of a node that has no number: it fails instead, and
// stores nothing. (Commits number new nodes first; here a trigger undoes
// that behind their back.)
func TestAllocationsNeedNodeNumbers(t *testing.T) {
	ctx := t.Context()
	s := openTemp(t, pgtest.NewDatabase(t))
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	block := func(id string, from int) core.Block {
		return core.Block{ID: id, Name: id, Team: "t", InstanceType: "x", GPUModel: "H100", Count: 1, Zone: "z",
			Start: start.Add(time.Duration(from) * time.Hour), End: start.Add(time.Duration(from+4) * time.Hour),
			State: core.StateScheduled, Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
			Placements: []core.Placement{{Node: "n1", GPUs: []int{0, 1}}}}
	}
	if err := s.Commit(ctx, store.Change{Insert: []core.Block{block("a", 0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM allocations; DELETE FROM nodes;
		CREATE FUNCTION forget() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
		CREATE TRIGGER forget BEFORE INSERT ON nodes FOR EACH ROW EXECUTE FUNCTION forget()`); err != nil {
		t.Fatal(err)
	}
	err := s.Commit(ctx, store.Change{Insert: []core.Block{block("b", 8)}})
	if err == nil {
		t.Fatal("Commit on a node without a number succeeded")
	}
	if _, gerr := s.GetBlock(ctx, "b"); !errors.Is(gerr, store.ErrNotFound) {
		t.Fatalf("after the failed commit (%v), GetBlock(b): %v, want not found", err, gerr)
	}
}

// TestJournalsMigration upgrades a database whose money is a ledger of
// charges and refunds (migrations 0001 to 0016) to journals of postings
// (0017), and checks the result with storetest.CheckLedgerMigrated.
func TestJournalsMigration(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 1. The schema of version 16, from the migration files.
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 16 {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("applying %s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}

	// 2. Blocks and ledger rows as version 16 wrote them.
	blocks, rows := storetest.LedgerV16()
	for _, b := range blocks {
		if _, err := conn.Exec(ctx, `INSERT INTO blocks (`+blockColumns+`)
			VALUES ($1, $1, $2, 'h100.8x', 'H100', 1, 'z', $3, $4, 'scheduled', 1, 'USD', $3, '{}', '[]', false, false, 1)`,
			b.ID, b.Team, b.Start, b.End); err != nil {
			t.Fatalf("inserting block %s: %v", b.ID, err)
		}
	}
	for _, r := range rows {
		if _, err := conn.Exec(ctx, `INSERT INTO ledger (id, team, time, kind, amount_minor, currency, subject,
			instance_type, on_demand_minor) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.ID, r.Team, r.Time, r.Kind, r.Amount, r.Currency, r.Subject, r.InstanceType, r.OnDemand); err != nil {
			t.Fatalf("inserting ledger row %s: %v", r.ID, err)
		}
	}

	// 3. Opening the store applies 0017.
	storetest.CheckLedgerMigrated(t, openTemp(t, dsn))
}

// TestLeasesMigration upgrades a database with pending actions
// (migrations 0001 to 0017) to the leader's lease and the actions' claims
// (0018), and checks the result with storetest.CheckLeasesMigrated.
func TestLeasesMigration(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// 1. The schema of version 17, from the migration files.
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 17 {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("applying %s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}

	// 2. Actions as version 17 stored them, in their order.
	for _, a := range storetest.ActionsV17() {
		if _, err := conn.Exec(ctx, `INSERT INTO actions (id, kind, subject, team, payload, state, attempts, next_at, last_error, created_at, done_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL)`,
			a.ID, string(a.Kind), a.Subject, a.Team, a.Payload, string(a.State), a.Attempts,
			a.NextAt, a.LastError, a.CreatedAt); err != nil {
			t.Fatalf("inserting action %s: %v", a.ID, err)
		}
	}

	// 3. Opening the store applies 0018.
	storetest.CheckLeasesMigrated(t, openTemp(t, dsn))
}
