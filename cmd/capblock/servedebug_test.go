package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDebugAddress: a port alone listens on loopback only; anything that
// is not an address is refused before the server does anything.
func TestDebugAddress(t *testing.T) {
	for flag, want := range map[string]string{
		"":               "",
		"6060":           "127.0.0.1:6060",
		":6060":          "127.0.0.1:6060",
		"0.0.0.0:6060":   "0.0.0.0:6060",
		"[::1]:6060":     "[::1]:6060",
		"localhost:6060": "localhost:6060",
	} {
		got, err := debugAddress(flag)
		if err != nil || got != want {
			t.Errorf("debugAddress(%q) = %q, %v; want %q", flag, got, err, want)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "capblock.db")
	for _, flag := range []string{"localhost:", "a:b:c"} {
		r := runApp(t.Context(), nil, "serve", "--db", db, "--listen", "127.0.0.1:0", "--debug-listen", flag)
		if r.code != 2 || !strings.Contains(r.stderr, "--debug-listen") {
			t.Errorf("serve --debug-listen %q: exit %d, %s; want a usage error naming the flag", flag, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("serve with a bad --debug-listen made the database")
	}
}

// TestDebugListen: serve --debug-listen serves the profiles on their own
// address, and the API's address does not serve them.
func TestDebugListen(t *testing.T) {
	dir := t.TempDir()
	addr, debug := freeAddr(t), freeAddr(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan result, 1)
	go func() {
		done <- runApp(ctx, nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", addr,
			"--debug-listen", debug, "--jobs-dir", filepath.Join(dir, "jobs"), "--log-level", "error")
	}()
	get := func(url string) (int, string) {
		r, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := get("http://" + addr + "/healthz"); code == http.StatusOK {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer within 30 s")
		}
	}
	if code, body := get("http://" + debug + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("the goroutine profile on --debug-listen: %d %.200s", code, body)
	}
	if code, body := get("http://" + addr + "/debug/pprof/goroutine?debug=1"); code == http.StatusOK && strings.Contains(body, "goroutine profile") {
		t.Errorf("the API's address serves the profiles too")
	}
	stop()
	if r := <-done; r.code != 0 {
		t.Fatalf("serve: exit %d, %s", r.code, r.stderr)
	}
}
