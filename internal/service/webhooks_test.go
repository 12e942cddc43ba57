package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

var hookT0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// hookEnv is a service on a fresh SQLite store with teams t1 and t2, and
// no fleet: its events are committed directly.
type hookEnv struct {
	t   *testing.T
	svc *Service
	st  *sqlite.Store
	seq int
}

// newHookEnv allows private receivers: the tests' listen on loopback.
func newHookEnv(t *testing.T) *hookEnv { t.Helper(); return newHookEnvWith(t, true) }

func newHookEnvWith(t *testing.T, allowPrivate bool) *hookEnv {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hooks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(ctx, Config{Fleet: core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()},
		Store: st, Clock: clock.NewSim(hookT0), Log: slog.New(slog.DiscardHandler), AllowPrivateWebhooks: allowPrivate})
	if err != nil {
		t.Fatal(err)
	}
	for _, team := range []string{"t1", "t2"} {
		if err := st.CreateTeam(ctx, core.Team{ID: team, Name: team, CreatedAt: hookT0}); err != nil {
			t.Fatal(err)
		}
	}
	return &hookEnv{t: t, svc: svc, st: st}
}

// emit commits one event of each type for team and wakes the worker.
func (e *hookEnv) emit(team string, types ...string) {
	e.t.Helper()
	var c store.Change
	for _, typ := range types {
		e.seq++
		c.Events = append(c.Events, core.Event{ID: fmt.Sprintf("evt-%d", e.seq), Time: hookT0, Type: typ,
			Subject: "cb-1", Team: team, Data: map[string]any{"n": e.seq}})
	}
	if err := e.st.Commit(e.t.Context(), c); err != nil {
		e.t.Fatal(err)
	}
	e.svc.notifyEvents()
}

// run starts the delivery worker until the test ends.
func (e *hookEnv) run(opts WebhookOptions) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.RunWebhooksWith(ctx, opts)
	}()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return stop
}

func (e *hookEnv) hook(team, url string, patterns ...string) core.Webhook {
	e.t.Helper()
	w, err := e.svc.CreateWebhook(e.t.Context(), team, url, patterns)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// logOf summarizes a webhook's delivery log, one "event attempt status
// done" line each.
func (e *hookEnv) logOf(id string) []string {
	e.t.Helper()
	ds, err := e.svc.Deliveries(e.t.Context(), "", id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		line := fmt.Sprintf("%s %d %d", d.EventID, d.Attempt, d.Status)
		if d.Done {
			line += " done"
		}
		out = append(out, line)
	}
	return out
}

// waitLog waits until a webhook's log summary is want.
func (e *hookEnv) waitLog(id string, want []string) {
	e.t.Helper()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = e.logOf(id); cmp.Equal(want, got) {
			return
		}
	}
	e.t.Fatalf("delivery log of %s (-want +got):\n%s", id, cmp.Diff(want, got))
}

// receiver is an HTTP endpoint that checks each delivery's signature and
// answers with what status says for the n-th request (from 1).
type receiver struct {
	*httptest.Server
	secret string
	status func(n int) int

	mu   sync.Mutex
	got  []string // "type id" of each request
	errs []string
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	r := &receiver{status: status}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if err := core.VerifySignature([]byte(r.secret), req.Header.Get(core.SignatureHeader), body, time.Now(), time.Minute); err != nil {
			r.errs = append(r.errs, err.Error())
		}
		var id string
		if _, after, ok := strings.Cut(string(body), `"id":"`); ok {
			id, _, _ = strings.Cut(after, `"`)
		}
		r.got = append(r.got, req.Header.Get("Capblock-Event")+" "+id)
		n := len(r.got)
		r.mu.Unlock()
		w.WriteHeader(r.status(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...), append([]string(nil), r.errs...)
}

func always(status int) func(int) int { return func(int) int { return status } }

var fastRetries = WebhookOptions{FirstRetry: time.Millisecond, MaxRetry: 4 * time.Millisecond, MaxAttempts: 3, Poll: 20 * time.Millisecond}

// TestWebhookDeliveries: each webhook gets its team's matching events in
// order, signed; one that always fails is retried, then given up, and
// holds up no other.
func TestWebhookDeliveries(t *testing.T) {
	e := newHookEnv(t)
	broken, ok := newReceiver(t, always(500)), newReceiver(t, always(204))
	brokenHook := e.hook("t1", broken.URL, "block.*")
	okHook := e.hook("t1", ok.URL, "*")
	broken.secret, ok.secret = brokenHook.Secret, okHook.Secret
	e.run(fastRetries)

	e.emit("t1", "block.active", "plan.committed")
	e.emit("t2", "block.active") // another team's
	e.emit("t1", "block.expired")

	e.waitLog(okHook.ID, []string{
		"evt-1 0 0", "evt-1 1 204 done",
		"evt-2 0 0", "evt-2 1 204 done",
		"evt-4 0 0", "evt-4 1 204 done",
	})
	e.waitLog(brokenHook.ID, []string{
		"evt-1 0 0", "evt-1 1 500", "evt-1 2 500", "evt-1 3 500 done",
		"evt-4 0 0", "evt-4 1 500", "evt-4 2 500", "evt-4 3 500 done",
	})
	got, errs := ok.requests()
	if diff := cmp.Diff([]string{"block.active evt-1", "plan.committed evt-2", "block.expired evt-4"}, got); diff != "" {
		t.Errorf("deliveries to the working webhook (-want +got):\n%s", diff)
	}
	if len(errs) > 0 {
		t.Errorf("bad signatures: %v", errs)
	}
	got, errs = broken.requests()
	want := []string{"block.active evt-1", "block.active evt-1", "block.active evt-1", "block.expired evt-4", "block.expired evt-4", "block.expired evt-4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts at the failing webhook (-want +got):\n%s", diff)
	}
	if len(errs) > 0 {
		t.Errorf("bad signatures: %v", errs)
	}
	ds, err := e.svc.Deliveries(t.Context(), "t1", brokenHook.ID)
	if err != nil {
		t.Fatal(err)
	}
	if last := ds[3]; last.Error != "answered 500 Internal Server Error; gave up after 3 attempts" || !last.NextAt.IsZero() {
		t.Errorf("last attempt: error %q, next %v; want given up", last.Error, last.NextAt)
	}
	if retry := ds[1]; retry.Error != "answered 500 Internal Server Error" || retry.NextAt.IsZero() {
		t.Errorf("first attempt: error %q, next %v; want a retry", retry.Error, retry.NextAt)
	}
}

// TestWebhookResumes: a worker stopped with deliveries unmade leaves them
// in the log, and the next worker makes them, in order, scheduling none
// twice.
func TestWebhookResumes(t *testing.T) {
	e := newHookEnv(t)
	// The receiver holds its first request until the first worker stops.
	held, release := make(chan struct{}), make(chan struct{})
	r := newReceiver(t, func(n int) int {
		if n == 1 {
			close(held)
			<-release
		}
		return 200
	})
	w := e.hook("t1", r.URL, "block.*")
	r.secret = w.Secret
	stop := e.run(fastRetries)
	e.emit("t1", "block.scheduled", "block.active")
	<-held
	e.waitLog(w.ID, []string{"evt-1 0 0", "evt-2 0 0"})
	stop() // cuts the first attempt short: it is not logged
	close(release)

	// A crash between scheduling an event and moving the cursor past it
	// leaves an Attempt 0 line after the cursor: the event is not
	// scheduled again.
	e.emit("t1", "block.expired")
	now := time.Now()
	if err := e.st.AppendDelivery(t.Context(), core.Delivery{ID: "whd-crash", Webhook: w.ID, EventID: "evt-3", EventSeq: 3,
		Time: now, NextAt: now}); err != nil {
		t.Fatal(err)
	}

	e.run(fastRetries)
	e.waitLog(w.ID, []string{"evt-1 0 0", "evt-1 1 200 done", "evt-2 0 0", "evt-2 1 200 done", "evt-3 0 0", "evt-3 1 200 done"})
	got, errs := r.requests()
	want := []string{"block.scheduled evt-1", "block.scheduled evt-1", "block.active evt-2", "block.expired evt-3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if len(errs) > 0 {
		t.Errorf("bad signatures: %v", errs)
	}
	// The cursor moves past evt-3 once the worker has read it, which may be
	// after its delivery: it was queued from the log.
	var cursor int64
	for deadline := time.Now().Add(10 * time.Second); cursor != 3 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var err error
		if cursor, err = e.st.WebhookCursor(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if cursor != 3 {
		t.Errorf("cursor = %d, want 3", cursor)
	}
}

// TestWebhookFromCreation: a webhook gets the events from its creation
// on, not those before.
func TestWebhookFromCreation(t *testing.T) {
	e := newHookEnv(t)
	e.emit("t1", "block.active")
	if _, err := e.svc.clock.(*clock.Sim).Advance(time.Minute); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, always(200))
	w := e.hook("t1", r.URL, "*")
	r.secret = w.Secret
	e.run(fastRetries)
	var c store.Change
	c.Events = []core.Event{{ID: "evt-late", Time: hookT0.Add(time.Minute), Type: "block.expired", Subject: "cb-1", Team: "t1"}}
	if err := e.st.Commit(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	e.svc.notifyEvents()
	e.waitLog(w.ID, []string{"evt-late 0 0", "evt-late 1 200 done"})
}

func TestCreateWebhookChecks(t *testing.T) {
	tests := map[string]struct {
		url      string
		patterns []string
		want     []string // the stored patterns
		wantErr  string
	}{
		"http":                {url: "http://example.com/h", patterns: []string{"*"}, want: []string{"*"}},
		"repeats dropped":     {url: "https://example.com/h", patterns: []string{"block.*", "job.*", "block.*"}, want: []string{"block.*", "job.*"}},
		"another scheme":      {url: "ftp://example.com/h", patterns: []string{"*"}, wantErr: "http:// or https://"},
		"no host":             {url: "https:///h", patterns: []string{"*"}, wantErr: "http:// or https://"},
		"relative":            {url: "/h", patterns: []string{"*"}, wantErr: "http:// or https://"},
		"not a URL":           {url: "http://[::1", patterns: []string{"*"}, wantErr: "http:// or https://"},
		"too long":            {url: "https://example.com/" + strings.Repeat("a", 2048), patterns: []string{"*"}, wantErr: "longer than"},
		"no patterns":         {url: "https://example.com/h", wantErr: "at least one"},
		"a bad pattern":       {url: "https://example.com/h", patterns: []string{"block.*", "block*"}, wantErr: `"block*"`},
		"too many patterns":   {url: "https://example.com/h", patterns: make([]string, 33), wantErr: "more than the 32"},
		"secret not in error": {url: "https://user:hunter2@example.com:bad/h", patterns: []string{"*"}, wantErr: "http:// or https://"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newHookEnv(t)
			w, err := e.svc.CreateWebhook(t.Context(), "t1", tc.url, tc.patterns)
			if tc.wantErr != "" {
				if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("CreateWebhook: %v, want an invalid argument about %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateWebhook: %v", err)
			}
			if diff := cmp.Diff(tc.want, w.Events); diff != "" {
				t.Errorf("patterns (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(w.Secret, "whsec_") || len(w.Secret) < 40 {
				t.Errorf("secret %q is not a fresh random one", w.Secret)
			}
		})
	}
}

func TestWebhookScoping(t *testing.T) {
	e := newHookEnv(t)
	w := e.hook("t1", "https://example.com/h", "*")
	if _, err := e.svc.CreateWebhook(t.Context(), "t9", "https://example.com/h", []string{"*"}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("CreateWebhook for an unknown team: %v, want an invalid argument", err)
	}
	for _, scope := range []string{"", "t1"} {
		if _, err := e.svc.Deliveries(t.Context(), scope, w.ID); err != nil {
			t.Errorf("Deliveries in scope %q: %v", scope, err)
		}
	}
	if _, err := e.svc.Deliveries(t.Context(), "t2", w.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Deliveries of another team's webhook: %v, want not found", err)
	}
	if _, err := e.svc.DeleteWebhook(t.Context(), "t2", w.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("DeleteWebhook of another team's webhook: %v, want not found", err)
	}
	if hooks, err := e.svc.ListWebhooks(t.Context(), "t2"); err != nil || len(hooks) != 0 {
		t.Errorf("ListWebhooks of t2: %v, %v; want none", hooks, err)
	}
	if _, err := e.svc.DeleteWebhook(t.Context(), "t1", w.ID); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	if _, err := e.svc.DeleteWebhook(t.Context(), "", w.ID); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("DeleteWebhook twice: %v, want not found", err)
	}
	for range maxWebhooksPerTeam {
		e.hook("t2", "https://example.com/h", "*")
	}
	if _, err := e.svc.CreateWebhook(t.Context(), "t2", "https://example.com/h", []string{"*"}); !errors.Is(err, core.ErrInvalidArgument) {
		t.Errorf("CreateWebhook past the limit: %v, want an invalid argument", err)
	}
}

// TestWebhookLogPruned: the worker removes finished deliveries older than
// the retention from the log, and keeps those still being retried.
func TestWebhookLogPruned(t *testing.T) {
	e := newHookEnv(t)
	ok, broken := newReceiver(t, always(204)), newReceiver(t, always(500))
	okHook, brokenHook := e.hook("t1", ok.URL, "*"), e.hook("t1", broken.URL, "*")
	ok.secret, broken.secret = okHook.Secret, brokenHook.Secret
	opts := fastRetries
	opts.FirstRetry, opts.MaxRetry = time.Minute, time.Minute // the broken one stays pending
	opts.Retention, opts.PruneEvery = time.Nanosecond, 20*time.Millisecond
	e.run(opts)
	e.emit("t1", "block.active")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got, _ := ok.requests(); len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the working webhook got no delivery within 10s")
		}
	}
	e.waitLog(okHook.ID, nil) // delivered, then pruned
	e.waitLog(brokenHook.ID, []string{"evt-1 0 0", "evt-1 1 500"})
}
