package main

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"capblock/internal/seal"
)

// TestServeBadFlags: a bad flag of serve is one line saying what is wrong,
// exit status 2, before anything is opened or created.
func TestServeBadFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"log level":             {[]string{"--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		"webhook log retention": {[]string{"--webhook-log-retention", "forever"}, `--webhook-log-retention "forever": want a positive duration`},
		"zero retention":        {[]string{"--webhook-log-retention", "0"}, `--webhook-log-retention "0": want a positive duration`},
		"engine poll too short": {[]string{"--engine-poll", "10ms"}, `--engine-poll "10ms": want a duration of at least 1s`},
		"sim start":             {[]string{"--sim-clock", "--sim-start", "yesterday"}, `--sim-start "yesterday" is not an RFC 3339 time`},
		"backend":               {[]string{"--backend", "k8s"}, `--backend "k8s" is not available`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db := dir + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}

// TestServeTightensLooseFiles: an admin.token (or database) left readable
// by others, by an older version or a copy, is the server's alone once it
// starts again.
func TestServeTightensLooseFiles(t *testing.T) {
	dir := t.TempDir()
	db, token := filepath.Join(dir, "capblock.db"), filepath.Join(dir, "admin.token")
	serveAWhile(t, dir, func() bool { _, err := os.Stat(token); return err == nil })
	for _, path := range []string{db, token} {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	serveAWhile(t, dir, func() bool { return true })
	for _, path := range []string{db, token, filepath.Join(dir, "secrets.key")} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s after the start: mode %04o, want 0600", filepath.Base(path), perm)
		}
	}
}

// TestServeKeepsItsSecretsKey: a database whose secrets are sealed under
// a key does not start without that key's file. A missing file is not
// made anew (a new key would open none of the secrets): the start is
// refused, naming the key to restore. A file of another key is refused,
// naming both. The file put back starts it again.
func TestServeKeepsItsSecretsKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	serveAWhile(t, dir, func() bool { return true })
	key, err := seal.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, want ...string) {
		t.Helper()
		r := runApp(t.Context(), nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", freeAddr(t),
			"--jobs-dir", filepath.Join(dir, "jobs"), "--log-level", "error")
		if r.code == 0 {
			t.Fatalf("serve started on %s", what)
		}
		for _, w := range append(want, key.ID()) {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("the refusal to start on %s does not say %q: %s", what, w, r.stderr)
			}
		}
	}

	// 1. The key file lost.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	refused("a lost key file", path, "restore")
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new key file was made: %v", err)
	}
	// 2. Another key's file.
	other, _, err := seal.LoadOrCreate(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused("another key's file", other.ID())
	// 3. The file put back.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	serveAWhile(t, dir, func() bool { return true })
}

// serveAWhile runs serve on the database capblock.db in dir until it
// answers /healthz and ready() holds, then stops it.
func serveAWhile(t *testing.T, dir string, ready func() bool) {
	t.Helper()
	addr := freeAddr(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan result, 1)
	go func() {
		done <- runApp(ctx, nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", addr,
			"--jobs-dir", filepath.Join(dir, "jobs"), "--log-level", "error")
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r, err := http.Get("http://" + addr + "/healthz"); err == nil {
			r.Body.Close()
			if ready() {
				break
			}
		}
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("serve was not ready within 30 s")
		}
	}
	stop()
	if r := <-done; r.code != 0 {
		t.Fatalf("serve: exit %d, %s", r.code, r.stderr)
	}
}
