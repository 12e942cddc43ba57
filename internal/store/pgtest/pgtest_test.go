package pgtest

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestNewDatabase checks that databases are fresh, separate and usable
// over the socket, and that the server does not run as root.
func TestNewDatabase(t *testing.T) {
	a, b := NewDatabase(t), NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	connA := connect(t, a)
	if _, err := connA.Exec(t.Context(), `CREATE TABLE t (x int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatalf("writing to database a: %v", err)
	}
	connB := connect(t, b)
	var exists bool
	if err := connB.QueryRow(t.Context(), `SELECT to_regclass('t') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatalf("reading database b: %v", err)
	}
	if exists {
		t.Errorf("database b sees database a's table")
	}
	var superuser bool
	if err := connA.QueryRow(t.Context(), `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&superuser); err != nil {
		t.Fatalf("reading role: %v", err)
	}
	if !superuser {
		t.Errorf("tests do not connect as a superuser")
	}
	var fsync string
	if err := connA.QueryRow(t.Context(), `SHOW fsync`).Scan(&fsync); err != nil {
		t.Fatalf("SHOW fsync: %v", err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s, want off", fsync)
	}
	srv, err := sharedServer()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(srv.root, "data"))
	if err != nil {
		t.Fatalf("data directory: %v", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid == 0 {
		t.Errorf("the data directory belongs to root: the server would refuse to start")
	}
}

// TestStartStop checks that a server of its own starts, serves and leaves
// nothing behind.
func TestStartStop(t *testing.T) {
	s, err := StartServer()
	if err != nil {
		fail(t, err)
	}
	conn := connect(t, s.NewDatabase(t))
	if err := conn.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	conn.Close(t.Context())
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(s.root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left %s behind (stat: %v)", s.root, err)
	}
}

// TestRestart checks that a restarted server serves the same databases
// at the same URLs, keeps what a durable commit wrote before the crash,
// cuts off the connections of before, and still drops its databases.
func TestRestart(t *testing.T) {
	s := Start(t)
	dsn := s.NewDatabase(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `SET synchronous_commit = on; CREATE TABLE t (x int); INSERT INTO t VALUES (7)`); err != nil {
		t.Fatalf("writing before the restart: %v", err)
	}
	if err := s.Restart(100 * time.Millisecond); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := conn.Ping(t.Context()); err == nil {
		t.Errorf("a connection of before the restart still answers")
	}
	var x int
	if err := connect(t, dsn).QueryRow(t.Context(), `SELECT x FROM t`).Scan(&x); err != nil || x != 7 {
		t.Fatalf("reading after the restart: %d, %v; want 7", x, err)
	}
	// The server still makes databases (and drops them when t ends).
	connect(t, s.NewDatabase(t))
}

func TestFindBinaries(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"13", "16", "9"} {
		bin := filepath.Join(dir, v, "bin")
		writeExecutable(t, filepath.Join(bin, "initdb"))
		writeExecutable(t, filepath.Join(bin, "pg_ctl"))
	}
	// 17 lacks pg_ctl.
	writeExecutable(t, filepath.Join(dir, "17", "bin", "initdb"))
	glob := filepath.Join(dir, "*", "bin")

	initdb, pgCtl, err := findBinaries(lookNowhere, glob)
	if err != nil {
		t.Fatalf("findBinaries: %v", err)
	}
	if want := filepath.Join(dir, "16", "bin", "initdb"); initdb != want {
		t.Errorf("initdb = %s, want the newest complete version %s", initdb, want)
	}
	if want := filepath.Join(dir, "16", "bin", "pg_ctl"); pgCtl != want {
		t.Errorf("pg_ctl = %s, want %s", pgCtl, want)
	}

	onPath := func(name string) (string, error) { return "/opt/pg/" + name, nil }
	if initdb, _, _ := findBinaries(onPath, glob); initdb != "/opt/pg/initdb" {
		t.Errorf("initdb = %s, want the one on PATH", initdb)
	}
	if _, _, err := findBinaries(lookNowhere, filepath.Join(t.TempDir(), "*", "bin")); !errors.Is(err, ErrNoBinaries) {
		t.Errorf("findBinaries without binaries: got %v, want ErrNoBinaries", err)
	}
}

// TestMissingBinaries checks that a missing PostgreSQL skips a test, but
// fails it under CI=true.
func TestMissingBinaries(t *testing.T) {
	tests := map[string]struct {
		ci       string
		err      error
		wantSkip bool
	}{
		"missing":           {err: ErrNoBinaries, wantSkip: true},
		"missing in CI":     {ci: "true", err: ErrNoBinaries},
		"broken":            {err: errors.New("initdb failed")},
		"CI=false skips":    {ci: "false", err: ErrNoBinaries, wantSkip: true},
		"missing, wrapped":  {err: errors.Join(errors.New("x"), ErrNoBinaries), wantSkip: true},
		"broken, not in CI": {ci: "", err: errors.New("pg_ctl failed")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() { // Skip and Fatal end the goroutine
				defer close(done)
				fail(r, tc.err)
			}()
			<-done
			if r.skipped != tc.wantSkip || r.failed == tc.wantSkip {
				t.Errorf("skipped %v, failed %v; want skipped %v", r.skipped, r.failed, tc.wantSkip)
			}
		})
	}
}

// recorder is a testing.TB that records Skip and Fatal.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatal(args ...any) { r.failed = true; runtime.Goexit() }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(t.Context()) })
	return conn
}

func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func lookNowhere(name string) (string, error) { return "", errors.New("not on PATH") }
