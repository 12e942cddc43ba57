// Package pgtest runs throwaway PostgreSQL servers for tests, from the
// PostgreSQL binaries (initdb, pg_ctl) and nothing else: no system service,
// no TCP port, no password. A server lives in a temporary directory,
// listens only on a Unix socket there, runs with fsync off, and is removed
// when it stops.
//
// A package shares one server between its tests, each test getting a
// fresh database:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) {
//		dsn := pgtest.NewDatabase(t) // postgres://… on the server's socket
//		…
//	}
//
// Without the binaries the tests skip, except under CI=true, where they
// fail: CI must run them (.ci/run installs Debian's postgresql package).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries is the reason that tests skip when PostgreSQL is missing.
var ErrNoBinaries = errors.New("PostgreSQL binaries (initdb, pg_ctl) not found; install Debian's postgresql package or run .ci/run")

// binGlob is where Debian's packages put each major version's binaries.
const binGlob = "/usr/lib/postgresql/*/bin"

// superuser is the name of the database superuser that initdb creates.
const superuser = "postgres"

// Server is one running throwaway PostgreSQL server.
type Server struct {
	root      string // temporary directory: data/, sock/, server.log
	pgCtl     string
	socketDir string
	cred      *syscall.Credential // the user the server runs as; nil: this process's
	startArgs []string            // pg_ctl's arguments that start the server, for Restart

	mu    sync.Mutex
	admin *pgx.Conn // to the postgres database, for CREATE/DROP DATABASE
	n     int       // databases created so far
}

// Start starts a server for one test (or benchmark) and stops it when the
// test ends. It skips the test when the binaries are missing, unless
// CI=true.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartServer()
	if err != nil {
		fail(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return s
}

// fail skips or fails tb for a server that could not start: a missing
// binary skips, except under CI=true; anything else fails.
func fail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNoBinaries) && os.Getenv("CI") != "true" {
		tb.Skip(err.Error())
	}
	tb.Fatal(err)
}

// StartServer starts a server in a new temporary directory. The caller
// stops it. The error wraps ErrNoBinaries when PostgreSQL is missing.
func StartServer() (*Server, error) {
	initdb, pgCtl, err := findBinaries(exec.LookPath, binGlob)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	removeAbandoned()
	// 1. A directory the server's user owns.
	root, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("creating PostgreSQL directory: %w", err)
	}
	s := &Server{root: root, pgCtl: pgCtl, socketDir: filepath.Join(root, "sock"), cred: cred}
	if err := s.prepareRoot(); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	// 2. The cluster, and the server on a socket only.
	data := filepath.Join(root, "data")
	if err := s.run(initdb, "-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("initdb: %w", err)
	}
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=off"+
		" -c full_page_writes=off -c max_connections=200", s.socketDir)
	s.startArgs = []string{"-D", data, "-l", filepath.Join(root, "server.log"), "-w", "-t", "60", "-o", opts, "start"}
	if err := s.run(pgCtl, s.startArgs...); err != nil {
		log, _ := os.ReadFile(filepath.Join(root, "server.log"))
		os.RemoveAll(root)
		return nil, fmt.Errorf("starting PostgreSQL: %w\nserver log:\n%s", err, log)
	}
	// 3. The connection that creates the databases.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.admin, err = pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return s, nil
}

// prepareRoot makes the directories and, when the server runs as another
// user, hands them over; it records this process as their owner.
func (s *Server) prepareRoot() error {
	if err := os.Mkdir(s.socketDir, 0o700); err != nil {
		return fmt.Errorf("creating socket directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.root, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("recording owner: %w", err)
	}
	if s.cred == nil {
		return nil
	}
	for _, dir := range []string{s.root, s.socketDir} {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("handing %s to uid %d: %w", dir, s.cred.Uid, err)
		}
	}
	return nil
}

// run runs a PostgreSQL program as the server's user, in the server's
// directory, without the PG* variables that could point it elsewhere.
func (s *Server) run(program string, args ...string) error {
	cmd := exec.Command(program, args...)
	cmd.Dir = s.root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+s.root, "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(program), strings.Join(args, " "), err, out)
	}
	return nil
}

// DSN returns the URL of database db on the server.
func (s *Server) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Path:     "/" + db,
		RawQuery: url.Values{"host": {s.socketDir}, "sslmode": {"disable"}}.Encode(),
	}
	return u.String()
}

// NewDatabase creates an empty database for tb, dropped when tb ends, and
// returns its URL.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	name := fmt.Sprintf("test_%d", s.n)
	if _, err := s.admin.Exec(tb.Context(), "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.admin == nil { // the server stopped first
			return
		}
		if _, err := s.admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("dropping database %s: %v", name, err)
		}
	})
	return s.DSN(name)
}

// Restart stops the server at once, as a crash would (every client is
// cut off and nothing is checkpointed), leaves it down for down, and
// starts it again on the same data directory and socket (its port), so
// the URLs of its databases reach the same data. What a commit
// acknowledged under synchronous_commit=off, the server's setting, had
// not yet written is lost with the crash: a test that counts on every
// acknowledged commit turns it on for its database
// (ALTER DATABASE … SET synchronous_commit = on).
func (s *Server) Restart(down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin != nil {
		s.admin.Close(context.Background())
		s.admin = nil
	}
	data := filepath.Join(s.root, "data")
	if err := s.run(s.pgCtl, "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("stopping PostgreSQL in %s for a restart: %w", s.root, err)
	}
	time.Sleep(down)
	if err := s.run(s.pgCtl, s.startArgs...); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.root, "server.log"))
		return fmt.Errorf("restarting PostgreSQL: %w\nserver log:\n%s", err, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL after its restart: %w", err)
	}
	s.admin = admin
	return nil
}

// Stop stops the server at once (its data is thrown away, so nothing
// needs a clean shutdown) and removes its directory.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin != nil {
		s.admin.Close(context.Background())
		s.admin = nil
	}
	err := s.run(s.pgCtl, "-D", filepath.Join(s.root, "data"), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("stopping PostgreSQL in %s (left in place): %w", s.root, err)
	}
	if err := os.RemoveAll(s.root); err != nil {
		return fmt.Errorf("removing PostgreSQL directory: %w", err)
	}
	return nil
}

// findBinaries returns initdb and pg_ctl from PATH, or else from the
// newest version under glob.
func findBinaries(lookPath func(string) (string, error), glob string) (initdb, pgCtl string, err error) {
	i, err1 := lookPath("initdb")
	p, err2 := lookPath("pg_ctl")
	if err1 == nil && err2 == nil {
		return i, p, nil
	}
	dirs, _ := filepath.Glob(glob)
	sort.Slice(dirs, func(a, b int) bool { return majorVersion(dirs[a]) > majorVersion(dirs[b]) })
	for _, dir := range dirs {
		i, p := filepath.Join(dir, "initdb"), filepath.Join(dir, "pg_ctl")
		if isExecutable(i) && isExecutable(p) {
			return i, p, nil
		}
	}
	return "", "", ErrNoBinaries
}

// majorVersion is the number in /usr/lib/postgresql/<n>/bin, or 0.
func majorVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential returns the user to run the server as: PostgreSQL
// refuses to run as root, so root hands it to the "postgres" user that
// Debian's package creates, or else to "nobody". Anyone else runs it
// themselves (nil).
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
}
