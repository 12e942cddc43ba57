package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"capblock/internal/testbin"
)

// TestDurabilityKill9 runs the server as a separate process, buys blocks
// from several clients, kills the server with SIGKILL in the middle of the
// stream, restarts it on the same file and finds every block whose
// purchase was acknowledged.
func TestDurabilityKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "capblock.db")
	const simStart = "2026-12-01T00:00:00Z"

	srv := startProcess(t, bin, db, simStart)
	useToken(t, srv.url, filepath.Join(filepath.Dir(db), "admin.token"))
	// A quote buys once: every purchase gets a quote of its own, searched
	// before the stream, 400 of them, more than twice the purchases to
	// acknowledge before the kill. The searches go round 20 days, each
	// round returning the same slots under new ids, far fewer times than
	// a slot has room for.
	s := t0.Add(time.Hour)
	var offers []offering
	for search := 0; len(offers) < 400; search++ {
		from := s.Add(time.Duration(search%20) * 24 * time.Hour)
		found := (&env{t: t, url: srv.url}).offerings(searchQuery("l4.1x", 1, 1, from, from.Add(6*time.Hour)))
		if len(found) == 0 {
			t.Fatalf("no offering from %s", from)
		}
		offers = append(offers, found...)
	}

	var (
		mu    sync.Mutex
		acked []string
		n     atomic.Int64
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(offers); i += workers {
				select {
				case <-stop:
					return
				default:
				}
				o := offers[i]
				b, code, err := postBlock(srv.url, o.OfferingID, fmt.Sprintf("w%d-%d", w, i))
				if err != nil {
					return // the server is gone
				}
				if code == 201 {
					mu.Lock()
					acked = append(acked, b)
					mu.Unlock()
					n.Add(1)
				}
			}
		}()
	}
	// Kill while purchases are in flight, after a good number were acked.
	deadline := time.Now().Add(30 * time.Second)
	for n.Load() < 150 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.cmd.Wait()
	close(stop)
	wg.Wait()
	if len(acked) < 150 {
		t.Fatalf("only %d purchases acknowledged before the kill", len(acked))
	}

	srv2 := startProcess(t, bin, db, simStart)
	useToken(t, srv2.url, filepath.Join(filepath.Dir(db), "admin.token"))
	for _, id := range acked {
		var b block
		if code := call(t, srv2.url, "GET", "/v1/blocks/"+id, nil, &b); code != 200 || b.State != "scheduled" {
			t.Fatalf("acknowledged block %s after the restart: status %d, state %q", id, code, b.State)
		}
	}
	t.Logf("%d acknowledged blocks of %d quotes all found after kill -9", len(acked), len(offers))
	assertNoOverlap(t, db)
}

type process struct {
	cmd *exec.Cmd
	url string
}

var (
	listenLine    = testbin.ListenLine
	listenLineTLS = regexp.MustCompile(`url=(https://127\.0\.0\.1:\d+)`)
)

// startProcess starts `capblock serve` on db with a simulated clock (at
// simStart, or where the database left it when simStart is "") and waits
// for the line that says where it listens.
func startProcess(t testing.TB, bin, db, simStart string) *process {
	t.Helper()
	// The jobs these tests run are their own scripts, writing where the
	// test reads: as the server's user (TestJobContainment runs them as
	// users of their own).
	return startProcessWith(t, bin, db, simStart, "--allow-unisolated-jobs")
}

// startProcessWith is startProcess with more flags for serve.
func startProcessWith(t testing.TB, bin, db, simStart string, flags ...string) *process {
	t.Helper()
	args := []string{"serve", "--db", db, "--listen", "127.0.0.1:0", "--sim-clock", "--rate-limit", "0"}
	if simStart != "" {
		args = append(args, "--sim-start", simStart)
	}
	args = append(args, flags...)
	cmd := exec.Command(bin, args...)
	return &process{cmd: cmd, url: testbin.Serve(t, cmd, 30*time.Second)}
}

// buildBinary builds cmd/capblock once per test run.
func buildBinary(t testing.TB) string { return testbin.Capblock(t) }
