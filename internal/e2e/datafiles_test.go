package e2e

import (
	"bytes"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDataFilesOwnerOnly starts the binary with a umask that would make
// every file world-writable: the data directory it creates is 0700 and
// every file it creates (the database, its journal files, the token file,
// the secrets key, the jobs' state) is readable by the server's user alone.
func TestDataFilesOwnerOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data", "nested")
	cmd := exec.Command("/bin/sh", "-c", `umask 000; exec "$0" serve --db "$1" --listen 127.0.0.1:0 --sim-clock`, bin, filepath.Join(data, "capblock.db"))
	p := startCmd(t, cmd)
	call(t, p.url, "GET", "/v1/blocks", nil, nil, readToken(t, filepath.Join(data, "admin.token")))

	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data directory: %v, mode %v; want 0700", err, fi.Mode().Perm())
	}
	seen := 0
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %o: others may read or write it", path, fi.Mode().Perm())
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"capblock.db", "capblock.db-wal", "capblock.db-shm", "admin.token", "secrets.key"} {
		if _, err := os.Stat(filepath.Join(data, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	t.Logf("%d files and directories checked", seen)
}

// TestTokenFileNeverReplaced: a second server in the same directory, on
// another database, never replaces the first one's admin.token, whether it
// cannot bind its port, finds the token file there, or starts on an empty
// database file.
func TestTokenFileNeverReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	first := startCmd(t, exec.Command(bin, "serve", "--db", filepath.Join(dir, "one.db"), "--listen", "127.0.0.1:0", "--sim-clock"))
	tokenFile := filepath.Join(dir, "admin.token")
	token := readToken(t, tokenFile)
	addr := strings.TrimPrefix(first.url, "http://")

	// 1. Another database, a port already taken: nothing is written.
	out, err := exec.Command(bin, "serve", "--db", filepath.Join(dir, "two.db"), "--listen", addr, "--sim-clock").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "listening on") {
		t.Fatalf("a server on a taken port: %v\n%s", err, out)
	}
	// 2. Another database on a free port: refused, the file stays.
	out, err = exec.Command(bin, "serve", "--db", filepath.Join(dir, "three.db"), "--listen", freeAddr(t), "--sim-clock").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "admin.token") || !strings.Contains(string(out), "--admin-token-file") {
		t.Fatalf("a new database beside another's token file: %v\n%s", err, out)
	}
	// 3. An empty database file: the same.
	if err := os.WriteFile(filepath.Join(dir, "empty.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "serve", "--db", filepath.Join(dir, "empty.db"), "--listen", freeAddr(t), "--sim-clock").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already exists") {
		t.Fatalf("an empty database beside another's token file: %v\n%s", err, out)
	}
	if got := readToken(t, tokenFile); got != token {
		t.Fatalf("admin.token was replaced")
	}
	if status := call(t, first.url, "GET", "/v1/blocks", nil, nil, token); status != 200 {
		t.Fatalf("the first server's token: status %d", status)
	}
}

// startCmd starts a prepared `capblock serve` command and waits for the
// line that says where it listens.
func startCmd(t testing.TB, cmd *exec.Cmd) *process {
	t.Helper()
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := listenLine.FindStringSubmatch(logs.String()); m != nil {
			return &process{cmd: cmd, url: m[1]}
		}
	}
	t.Fatalf("the server did not say where it listens:\n%s", logs.String())
	return nil
}

func readToken(t testing.TB, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
