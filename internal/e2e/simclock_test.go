package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSimClockSurvivesRestart: the simulated clock is stored, so a restart
// goes on from where it was moved to, never back to the wall clock's hour
// or to an earlier --sim-start, which is refused with what to do instead.
func TestSimClockSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "capblock.db")
	srv := startProcess(t, bin, db, ts(t0))
	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	var clk struct {
		Now time.Time `json:"now"`
	}
	if code := call(t, srv.url, "POST", "/v1/admin/clock", map[string]string{"advance": "5h"}, &clk); code != 200 {
		t.Fatalf("advancing the clock: %d", code)
	}
	moved := t0.Add(5 * time.Hour)
	_ = srv.cmd.Process.Kill() // kill -9: the move was stored when it was acknowledged
	_ = srv.cmd.Wait()

	// 1. An earlier --sim-start is refused, naming the stored time.
	out, err := exec.Command(bin, "serve", "--db", db, "--listen", freeAddr(t), "--sim-clock", "--sim-start", ts(t0)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), ts(moved)) || !strings.Contains(string(out), "leave out --sim-start") {
		t.Fatalf("restart with an earlier --sim-start: %v\n%s", err, out)
	}
	// 2. Without --sim-start the clock goes on from the stored time.
	srv = startProcess(t, bin, db, "")
	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	if code := call(t, srv.url, "GET", "/v1/admin/clock", nil, &clk); code != 200 || !clk.Now.Equal(moved) {
		t.Fatalf("clock after a restart: %d %s, want %s", code, clk.Now, moved)
	}
	// 3. A later --sim-start moves it on.
	_ = srv.cmd.Process.Kill()
	_ = srv.cmd.Wait()
	later := moved.Add(24 * time.Hour)
	srv = startProcess(t, bin, db, ts(later))
	useToken(t, srv.url, filepath.Join(dir, "admin.token"))
	if code := call(t, srv.url, "GET", "/v1/admin/clock", nil, &clk); code != 200 || !clk.Now.Equal(later) {
		t.Fatalf("clock after a restart with a later --sim-start: %d %s, want %s", code, clk.Now, later)
	}
}
