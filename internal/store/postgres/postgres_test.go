package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/storetest"
)

// TestMain shares one throwaway server between the package's tests; each
// test opens its stores on fresh databases.
func TestMain(m *testing.M) { pgtest.Main(m) }

// harness opens each store on a new database of the shared server.
func harness() storetest.Harness {
	var (
		mu   sync.Mutex
		dsns = map[store.Full]string{}
	)
	open := func(t *testing.T, dsn string) store.Full {
		s := openTemp(t, dsn)
		mu.Lock()
		defer mu.Unlock()
		dsns[s] = dsn
		return s
	}
	return storetest.Harness{
		Open: func(t *testing.T) store.Full { return open(t, pgtest.NewDatabase(t)) },
		Reopen: func(t *testing.T, s store.Full) store.Full {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, dsn)
		},
		Replica: func(t *testing.T, s store.Full) store.Full {
			mu.Lock()
			dsn := dsns[s]
			mu.Unlock()
			return open(t, dsn)
		},
	}
}

func openTemp(tb testing.TB, dsn string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	pgtest.Require(t)
	storetest.Exercise(t, harness())
}

// TestExclusionConstraint checks that the database itself guards against
// double booking, as DESIGN.md promises.
func TestExclusionConstraint(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	var (
		def        string
		deferrable bool
	)
	err := s.pool.QueryRow(t.Context(), `SELECT pg_get_constraintdef(oid), condeferrable FROM pg_constraint
		WHERE conrelid = 'allocations'::regclass AND conname = 'allocations_no_overlap' AND contype = 'x'`).
		Scan(&def, &deferrable)
	if err != nil {
		t.Fatalf("reading the exclusion constraint: %v", err)
	}
	if want := "EXCLUDE USING gist (node WITH =, gpus WITH &&, during WITH &&) WHERE (live)"; !strings.HasPrefix(def, want) {
		t.Errorf("constraint is %q, want %q…", def, want)
	}
	if !deferrable {
		t.Errorf("constraint is not deferrable: a change that swaps two blocks' GPUs would fail")
	}
}

// TestDatabaseRefusesOverlap writes allocation rows directly, past
// Commit's own re-check: the database refuses an overlapping live one.
func TestDatabaseRefusesOverlap(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	block := func(id string) core.Block {
		return core.Block{ID: id, Name: id, Team: "team-a", InstanceType: "h100.1x", GPUModel: "H100", Count: 1,
			Zone: "z", Start: start, End: start.Add(4 * time.Hour), State: core.StateScheduled,
			Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
			Placements: []core.Placement{{Node: "n1", GPUs: []int{0}}}}
	}
	if err := s.Commit(t.Context(), store.Change{Insert: []core.Block{block("a")}}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	b := block("b")
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO blocks (`+blockColumns+`)
		VALUES ($1, $1, 't', 'x', 'H100', 1, 'z', $2, $3, 'scheduled', 1, 'USD', $2, '{}', '[]', false, false, 1)`,
		b.ID, b.Start, b.End); err != nil {
		t.Fatalf("inserting block b: %v", err)
	}
	insert := func(hours, gpus string, live bool) error {
		_, err := s.pool.Exec(t.Context(), `INSERT INTO allocations (block_id, node, gpus, during, live)
			VALUES ('b', (SELECT id FROM nodes WHERE name = 'n1'), $5::int4multirange,
				tstzrange($1::timestamptz + $2::interval, $1::timestamptz + $3::interval), $4)`,
			start, strings.Split(hours, "-")[0]+" hours", strings.Split(hours, "-")[1]+" hours", live, gpus)
		return err
	}
	tests := []struct {
		hours, gpus string
		live        bool
		wantCode    string
	}{
		{"2-6", "{[0,1)}", true, codeExclusionViolation}, // overlaps a's GPU 0 over [0, 4)
		{"2-6", "{[0,8)}", true, codeExclusionViolation}, // a whole node holds a's GPU too
		{"0-4", "{[0,1)}", false, ""},                    // not live: holds nothing
		{"0-4", "{[1,8)}", true, ""},                     // the node's other GPUs
		{"4-8", "{[0,1)}", true, ""},                     // adjacent
	}
	for _, tc := range tests {
		err := insert(tc.hours, tc.gpus, tc.live)
		if got := sqlState(err); got != tc.wantCode {
			t.Errorf("INSERT of GPUs %s over hours %s (live %v): got error %v, want SQLSTATE %q", tc.gpus, tc.hours, tc.live, err, tc.wantCode)
		}
		if tc.wantCode != "" && !store.IsConflict(dbError("inserting", err)) {
			t.Errorf("dbError(%v) is not a conflict", err)
		}
		if err == nil { // make room for the next rows
			s.pool.Exec(t.Context(), `DELETE FROM allocations WHERE block_id = 'b'`)
		}
	}
}

// TestGPURanges: the GPU sets of allocation rows.
func TestGPURanges(t *testing.T) {
	for _, tc := range []struct {
		gpus []int
		want string
	}{
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, "{[0,8)}"},
		{[]int{5, 0, 1}, "{[0,2),[5,6)}"},
		{[]int{3}, "{[3,4)}"},
		{[]int{1, 1, 2}, "{[1,3)}"},
		{[]int{0, 2, 4}, "{[0,1),[2,3),[4,5)}"},
	} {
		if got := gpuRanges(tc.gpus); got != tc.want {
			t.Errorf("gpuRanges(%v) = %s, want %s", tc.gpus, got, tc.want)
		}
	}
}

// TestMigrationsAppliedOnce opens three stores on one new database at
// once, as replicas starting together would.
func TestMigrationsAppliedOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	want, err := migrations()
	if err != nil {
		t.Fatalf("migrations: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), dsn)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	s := openTemp(t, dsn)
	rows, err := s.pool.Query(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	var got []store.MigrationState
	for rows.Next() {
		m := store.MigrationState{Applied: true}
		if err := rows.Scan(&m.Version, &m.Name); err != nil {
			t.Fatalf("reading schema_migrations: %v", err)
		}
		got = append(got, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	var wantStatus []store.MigrationState
	for _, m := range want {
		wantStatus = append(wantStatus, store.MigrationState{Version: m.Version, Name: m.Name, Applied: true})
	}
	if diff := cmp.Diff(wantStatus, got); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
	status, err := Migrations(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	if diff := cmp.Diff(wantStatus, status); diff != "" {
		t.Errorf("Migrations (-want +got):\n%s", diff)
	}
	if want[0].Name != "0001_init" {
		t.Errorf("first migration is %s, want 0001_init", want[0].Name)
	}
}

// TestEventsFollowedWithoutGaps follows the event cursor while several
// writers commit: commits take seq values in one order and may commit in
// another, and the follower must still see every event.
func TestEventsFollowedWithoutGaps(t *testing.T) {
	const writers, commits = 4, 40
	s := openTemp(t, pgtest.NewDatabase(t))
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range commits {
				id := fmt.Sprintf("w%d-%d", w, i)
				c := store.Change{Events: []core.Event{{ID: id, Time: time.Unix(0, 0), Type: "t", Subject: id, Team: "team-a"}}}
				if err := s.Commit(t.Context(), c); err != nil {
					t.Errorf("Commit %s: %v", id, err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[string]bool{}
	var after int64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		events, err := s.Events(t.Context(), "", after, 7)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		for _, e := range events {
			seen[e.ID] = true
			after = e.Seq
		}
		if finished && len(events) == 0 {
			break
		}
	}
	if len(seen) != writers*commits {
		t.Errorf("the follower saw %d events, want %d", len(seen), writers*commits)
	}
}

// TestCommitRefusesUnstorableText checks that a value PostgreSQL cannot
// store is an invalid argument, not a raw SQL error.
func TestCommitRefusesUnstorableText(t *testing.T) {
	s := openTemp(t, pgtest.NewDatabase(t))
	b := core.Block{ID: "b1", Name: "nul\x00byte", Team: "team-a", State: core.StateScheduled,
		Start: time.Unix(3600, 0), End: time.Unix(7200, 0), CreatedAt: time.Unix(0, 0)}
	err := s.Commit(t.Context(), store.Change{Insert: []core.Block{b}})
	if !errors.Is(err, core.ErrInvalidArgument) {
		t.Fatalf("Commit: got error %v, want an invalid argument", err)
	}
	if _, err := s.GetBlock(t.Context(), "b1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetBlock: got error %v, want ErrNotFound", err)
	}
}
