package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// shared is the server of a package whose TestMain calls Main, started by
// the first NewDatabase.
var shared struct {
	mu   sync.Mutex
	main bool
	srv  *Server
	err  error
}

// Main runs a package's tests (m.Run), then stops the server that
// NewDatabase started, if any, and exits.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// NewDatabase returns the URL of a new, empty database on the package's
// server, starting the server on first use; the database is dropped when
// tb ends. The package's TestMain must call Main. It skips tb when the
// binaries are missing, unless CI=true.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	srv, err := sharedServer()
	if err != nil {
		fail(tb, err)
	}
	return srv.NewDatabase(tb)
}

// Require starts the package's server unless it runs already, and skips
// tb when the binaries are missing, unless CI=true: a test with many
// subtests calls it first to skip once rather than in every subtest.
func Require(tb testing.TB) {
	tb.Helper()
	if _, err := sharedServer(); err != nil {
		fail(tb, err)
	}
}

func sharedServer() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		return nil, errors.New("pgtest.NewDatabase needs the package's TestMain to call pgtest.Main, which stops the server")
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = StartServer()
	}
	return shared.srv, shared.err
}

// ownerFile, in a server's directory, holds the pid of the test process
// that started the server.
const ownerFile = "owner.pid"

// removeAbandoned stops and removes the servers that earlier test
// processes left behind when they were killed before they could stop
// them: those whose owner is no longer running. It is best effort.
func removeAbandoned() {
	roots, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, root := range roots {
		text, err := os.ReadFile(filepath.Join(root, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(text))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		data := filepath.Join(root, "data")
		if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
			stopAbandoned(data)
		}
		os.RemoveAll(root)
	}
}

// stopAbandoned stops the server on data as the data directory's owner.
func stopAbandoned(data string) {
	_, pgCtl, err := findBinaries(exec.LookPath, binGlob)
	if err != nil {
		return
	}
	fi, err := os.Stat(data)
	if err != nil {
		return
	}
	cmd := exec.Command(pgCtl, "-D", data, "-m", "immediate", "-w", "stop")
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && st.Uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid, Groups: []uint32{}}}
	}
	cmd.Dir = filepath.Dir(data)
	cmd.Run()
}
