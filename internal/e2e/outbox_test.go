package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/api"
	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// fileEngine is an engine whose effects outlive the process that applies
// them: each call it takes is a line of a file ("activate cb-…"), written
// and synced before the call returns. Told to, it kills its own process
// with SIGKILL at its first activation, before it writes the line or
// after. Its effect is the set of its lines: a call taken twice has the
// effect of one, as a real engine's idempotent calls do.
type fileEngine struct {
	path  string
	crash string // "", "before" or "after"
}

func (fileEngine) Name() string { return "file" }

// Inventory reports the test fleet's nodes.
func (fileEngine) Inventory(context.Context) ([]core.Node, error) {
	f, err := fleet.Parse([]byte(testFleet))
	return f.Nodes, err
}

func (e fileEngine) Activate(_ context.Context, b core.Block) error  { return e.take("activate", b) }
func (e fileEngine) Terminate(_ context.Context, b core.Block) error { return e.take("terminate", b) }
func (e fileEngine) Release(_ context.Context, b core.Block) error   { return e.take("release", b) }

func (e fileEngine) take(kind string, b core.Block) error {
	if kind == "activate" && e.crash == "before" {
		killSelf()
	}
	f, err := os.OpenFile(e.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%s %s\n", kind, b.ID); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if kind == "activate" && e.crash == "after" {
		killSelf()
	}
	return nil
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// calls returns the lines of an engine's file.
func (e fileEngine) calls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// finishRecorder is the SQLite store, sending the id of each action it
// records done.
type finishRecorder struct {
	*sqlite.Store
	done chan string
}

func (f finishRecorder) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	changed, err := f.Store.FinishAction(ctx, epoch, id, at)
	if err == nil {
		f.done <- id
	}
	return changed, err
}

// outboxStack runs the real stack on the SQLite file db (the simulated
// clock where the file left it, else at t0) with be as the backend, and
// the leader's loop with its outbox worker; stop ends the loop and waits
// for it. done receives the actions recorded done. Jobs run on w, or not
// at all when it is nil.
func outboxStack(t *testing.T, db string, be backend.Backend, w ...backend.Workloads) (e *env, done <-chan string, stop func()) {
	t.Helper()
	ctx := context.Background()
	f, err := fleet.Parse([]byte(testFleet))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := t0
	if stored, ok, err := st.SimClock(ctx); err != nil {
		t.Fatal(err)
	} else if ok {
		start = stored
	}
	rec := finishRecorder{Store: st, done: make(chan string, 64)}
	sim := clock.NewSim(start)
	cfg := service.Config{Fleet: f, Store: rec, Backend: be, Clock: sim, Log: discard()}
	if len(w) > 0 {
		cfg.Workloads = w[0]
	}
	svc, err := service.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(filepath.Dir(db), "admin.token")
	if _, err := svc.Bootstrap(ctx, tokenPath); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(svc.Guarded(), api.Options{Logger: discard()}))
	t.Cleanup(srv.Close)
	useToken(t, srv.URL, tokenPath)
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		svc.Run(runCtx)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-ran
		}
	}
	t.Cleanup(stop)
	e = &env{t: t, url: srv.URL, db: db, store: st, svc: svc, sim: sim}
	e.team = e.whoami().Team
	return e, rec.done, stop
}

// outboxChildEnv names the directory of a TestOutboxKill9 child; its
// crash point comes in outboxCrashEnv.
const (
	outboxChildEnv = "CAPBLOCK_E2E_OUTBOX_CHILD"
	outboxCrashEnv = "CAPBLOCK_E2E_OUTBOX_CRASH"
)

// TestOutboxKill9Child is the server that TestOutboxKill9 kills: it buys
// a block, moves the clock to its start, and dies by SIGKILL in the
// engine's call of the activation that the start's commit stored.
func TestOutboxKill9Child(t *testing.T) {
	dir := os.Getenv(outboxChildEnv)
	if dir == "" {
		t.Skip("run by TestOutboxKill9")
	}
	engine := fileEngine{path: filepath.Join(dir, "engine"), crash: os.Getenv(outboxCrashEnv)}
	e, _, _ := outboxStack(t, filepath.Join(dir, "capblock.db"), engine)
	start := t0.Add(time.Hour)
	o := e.exact(searchQuery("l4.1x", 1, 2, start, start.Add(4*time.Hour)), 2, start)
	if _, code := e.buy(o.OfferingID, "kill9"); code != 201 {
		t.Fatalf("purchase: status %d", code)
	}
	e.advance(time.Hour)           // the start's commit stores the activation
	<-time.After(30 * time.Second) // a deadline: the kill comes long before
	t.Fatal("the engine was not called within 30s of the block's start")
}

// TestOutboxKill9: a server killed by SIGKILL between the commit that
// made a block active and the engine's acknowledgement of the activation
// (before the engine took it, or after it did but before the server
// recorded it) leaves the action pending; the next server on the same
// file applies it, and the engine holds it once: called once, or called
// again where its first call was never recorded, an idempotent repeat.
// The block's status shows the action done, with no failed attempt.
func TestOutboxKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process and kills it")
	}
	tests := map[string]struct {
		crash     string
		wantCalls int // the engine's calls of the activation, both servers
	}{
		"before the engine takes it":                 {crash: "before", wantCalls: 1},
		"after the engine took it, before recording": {crash: "after", wantCalls: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			engine := fileEngine{path: filepath.Join(dir, "engine")}
			// 1. The child dies by SIGKILL in the engine's call.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOutboxKill9Child$", "-test.v")
			cmd.Env = append(os.Environ(), outboxChildEnv+"="+dir, outboxCrashEnv+"="+tc.crash)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the server was not killed by SIGKILL: %v\n%s", err, out)
			}
			before := engine.calls(t)
			if want := tc.wantCalls - 1; len(before) != want {
				t.Fatalf("the engine's calls before the restart: %q, want %d", before, want)
			}
			// 2. The block is active and its activation pending, untried
			// as far as the store knows.
			db := filepath.Join(dir, "capblock.db")
			id, actionID := pendingActivation(t, db)
			// 3. The new server's worker applies it, at once.
			e, done, stop := outboxStack(t, db, engine)
			waitAction(t, done, actionID)
			stop() // nothing more runs: what the engine holds now is final
			want := make([]string, tc.wantCalls)
			for i := range want {
				want[i] = "activate " + id
			}
			if diff := cmp.Diff(want, engine.calls(t)); diff != "" {
				t.Errorf("the engine's calls (-want +got):\n%s", diff)
			}
			var st struct {
				Actions []struct {
					Kind      string `json:"kind"`
					State     string `json:"state"`
					Attempts  int    `json:"attempts"`
					LastError string `json:"lastError"`
				} `json:"actions"`
			}
			if code := call(t, e.url, "GET", "/v1/blocks/"+id+"/status", nil, &st); code != 200 {
				t.Fatalf("status of %s: %d", id, code)
			}
			wantStatus := []struct {
				Kind      string `json:"kind"`
				State     string `json:"state"`
				Attempts  int    `json:"attempts"`
				LastError string `json:"lastError"`
			}{{Kind: "activate", State: "done"}}
			if diff := cmp.Diff(wantStatus, st.Actions); diff != "" {
				t.Errorf("the block's actions (-want +got):\n%s", diff)
			}
		})
	}
}

// pendingActivation reads, from the SQLite file db, the one block stored
// and the id of its activation, failing unless the block is active and
// the activation pending without a failed try.
func pendingActivation(t *testing.T, db string) (block, action string) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	blocks, err := st.ListBlocks(t.Context(), store.BlockFilter{})
	if err != nil || len(blocks) != 1 || blocks[0].State != core.StateActive {
		t.Fatalf("blocks after the kill: %+v, %v; want one, active", blocks, err)
	}
	as, err := st.ActionsFor(t.Context(), blocks[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Kind != core.ActionActivate || as[0].State != core.ActionPending || as[0].Attempts != 0 {
		t.Fatalf("actions of %s after the kill: %+v; want its activation, pending, untried", blocks[0].ID, as)
	}
	return blocks[0].ID, as[0].ID
}

// waitAction waits for the action id to be recorded done.
func waitAction(t *testing.T, done <-chan string, id string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-done:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("action %s was not done within 30s", id)
		}
	}
}
