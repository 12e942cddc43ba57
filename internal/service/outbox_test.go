package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store/sqlite"
)

// outboxT0 is when the outbox's clock starts in these tests; the service
// clock starts at planT0.
var outboxT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// outboxEnv is a service on two H100 nodes (planEnv's fleet) with a
// Flaky sim backend, its outbox on a clock of its own that only the test
// moves, without jitter unless the test sets one, and a worker that the
// test runs one pass at a time.
type outboxEnv struct {
	t      *testing.T
	svc    *Service
	st     *sqlite.Store
	sim    *clock.Sim         // the service's clock
	wall   *clock.Sim         // the outbox's clock
	be     *backendtest.Flaky // over engine
	engine *local.Sim
	w      *outboxWorker
}

func newOutboxEnv(t *testing.T, opts OutboxOptions, blocks ...core.Block) *outboxEnv {
	t.Helper()
	pe := newPlanEnv(t, blocks...)
	e := &outboxEnv{t: t, st: pe.st, sim: pe.sim, wall: clock.NewSim(outboxT0), engine: local.NewSim(slog.New(slog.DiscardHandler), pe.svc.fleet.Nodes)}
	e.be = backendtest.NewFlaky(e.engine)
	opts.Clock = e.wall
	if opts.Jitter == nil {
		opts.Jitter = func(d time.Duration) time.Duration { return d }
	}
	svc, err := New(t.Context(), Config{Fleet: pe.svc.fleet, Store: pe.st, Backend: e.be, Clock: pe.sim,
		Log: slog.New(slog.DiscardHandler), Outbox: opts})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	// The worker records under the lease's epoch, which Run would hold.
	l, ok, err := pe.st.AcquireLease(t.Context(), "outbox-test", time.Hour)
	if err != nil || !ok {
		t.Fatalf("AcquireLease: %+v, ok %v, err %v", l, ok, err)
	}
	e.w = &outboxWorker{svc: svc, opts: svc.outbox.opts, epoch: l.Epoch}
	return e
}

// reconcileAt moves the service clock to hour h and reconciles.
func (e *outboxEnv) reconcileAt(h int) {
	e.t.Helper()
	if _, err := e.sim.Set(planHour(h)); err != nil {
		e.t.Fatal(err)
	}
	if err := e.svc.Reconcile(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// pass moves the outbox clock by d, then runs one pass of the worker.
func (e *outboxEnv) pass(d time.Duration) {
	e.t.Helper()
	if _, err := e.wall.Advance(d); err != nil {
		e.t.Fatal(err)
	}
	if err := e.w.pass(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// shownAction is what a block's status shows of an action, with its times
// in seconds after outboxT0 (-1 for none).
type shownAction struct {
	Kind      core.ActionKind
	State     core.ActionState
	Attempts  int
	LastError string
	Next      float64 // pending only
	Done      float64
}

func secondsOf(t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return t.Sub(outboxT0).Seconds()
}

// status returns the actions that block id's status shows to team.
func (e *outboxEnv) status(team, id string) []shownAction {
	e.t.Helper()
	st, err := e.svc.BlockStatus(e.t.Context(), team, id)
	if err != nil {
		e.t.Fatal(err)
	}
	out := []shownAction{}
	for _, a := range st.Actions {
		s := shownAction{Kind: a.Kind, State: a.State, Attempts: a.Attempts, LastError: a.LastError, Next: -1, Done: secondsOf(a.DoneAt)}
		if a.State == core.ActionPending {
			s.Next = secondsOf(a.NextAt)
		}
		out = append(out, s)
	}
	return out
}

func (e *outboxEnv) wantStatus(step, id string, want ...shownAction) {
	e.t.Helper()
	if diff := cmp.Diff(want, e.status("", id)); diff != "" {
		e.t.Errorf("%s: actions of %s (-want +got):\n%s", step, id, diff)
	}
}

func (e *outboxEnv) wantCalls(step string, want ...backendtest.Call) {
	e.t.Helper()
	if diff := cmp.Diff(want, e.be.Calls()); diff != "" {
		e.t.Errorf("%s: backend calls (-want +got):\n%s", step, diff)
	}
}

var errEngineDown = errors.New("engine unreachable")

const engineDown = "activate of block cb-a on the sim backend: engine unreachable"

// TestOutboxRetriesThenDone: an activation that the backend fails three
// times is retried after 1s, 2s and 4s, its status showing each failure,
// and is done at the fourth try, keeping its attempts and last error.
func TestOutboxRetriesThenDone(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{}, wholeNode("cb-a", "n0", 2, 10))
	e.be.FailNext(core.ActionActivate, 3, errEngineDown)
	e.reconcileAt(2)
	b, err := e.st.GetBlock(t.Context(), "cb-a")
	if err != nil || b.State != core.StateActive {
		t.Fatalf("block after its start: %v, %v; want active", b.State, err)
	}
	pending := func(attempts int, next float64) shownAction {
		s := shownAction{Kind: core.ActionActivate, State: core.ActionPending, Attempts: attempts, Next: next, Done: -1}
		if attempts > 0 {
			s.LastError = engineDown
		}
		return s
	}
	e.wantStatus("stored", "cb-a", pending(0, 0))
	steps := []struct {
		name    string
		advance time.Duration
		want    shownAction
		calls   int
	}{
		{"first try", 0, pending(1, 1), 1},
		{"not due yet", 999 * time.Millisecond, pending(1, 1), 1},
		{"second try", time.Millisecond, pending(2, 3), 2},
		{"third try", 2 * time.Second, pending(3, 7), 3},
		{"not due before 4s", 3 * time.Second, pending(3, 7), 3},
		{"fourth try", time.Second, shownAction{Kind: core.ActionActivate, State: core.ActionDone, Attempts: 3, LastError: engineDown, Next: -1, Done: 7}, 4},
		{"nothing more", time.Hour, shownAction{Kind: core.ActionActivate, State: core.ActionDone, Attempts: 3, LastError: engineDown, Next: -1, Done: 7}, 4},
	}
	for _, st := range steps {
		e.pass(st.advance)
		e.wantStatus(st.name, "cb-a", st.want)
		if got := len(e.be.Calls()); got != st.calls {
			t.Errorf("%s: %d backend calls, want %d", st.name, got, st.calls)
		}
	}
	if got := e.engine.State("cb-a"); got != "active" {
		t.Errorf("the engine holds %q for the block, want active", got)
	}
	// A team's member sees the retries, not the engine's words.
	want := []shownAction{{Kind: core.ActionActivate, State: core.ActionDone, Attempts: 3, Next: -1, Done: 7}}
	if diff := cmp.Diff(want, e.status("t", "cb-a")); diff != "" {
		t.Errorf("actions that the team sees (-want +got):\n%s", diff)
	}
}

// TestOutboxOrderPerSubject: a block's actions apply in the order they
// were decided, the next waiting while the one before is retried; another
// block's go on meanwhile.
func TestOutboxOrderPerSubject(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{Parallel: 1}, wholeNode("cb-a", "n0", 2, 6), wholeNode("cb-b", "n1", 2, 10))
	e.be.FailNext(core.ActionActivate, 1, errEngineDown)
	e.reconcileAt(7) // cb-a lives its whole life in one step; cb-b starts
	e.pass(0)
	e.wantCalls("first pass", backendtest.Call{Kind: core.ActionActivate, Block: "cb-a", Err: errEngineDown.Error()},
		backendtest.Call{Kind: core.ActionActivate, Block: "cb-b"})
	e.wantStatus("first pass", "cb-a",
		shownAction{Kind: core.ActionActivate, State: core.ActionPending, Attempts: 1, LastError: engineDown, Next: 1, Done: -1},
		shownAction{Kind: core.ActionTerminate, State: core.ActionPending, Next: 0, Done: -1},
		shownAction{Kind: core.ActionRelease, State: core.ActionPending, Next: 0, Done: -1})
	e.pass(time.Second)
	e.wantCalls("second pass", backendtest.Call{Kind: core.ActionActivate, Block: "cb-a", Err: errEngineDown.Error()},
		backendtest.Call{Kind: core.ActionActivate, Block: "cb-b"},
		backendtest.Call{Kind: core.ActionActivate, Block: "cb-a"},
		backendtest.Call{Kind: core.ActionTerminate, Block: "cb-a"},
		backendtest.Call{Kind: core.ActionRelease, Block: "cb-a"})
	done := func(kind core.ActionKind, attempts int, lastErr string) shownAction {
		return shownAction{Kind: kind, State: core.ActionDone, Attempts: attempts, LastError: lastErr, Next: -1, Done: 1}
	}
	e.wantStatus("second pass", "cb-a", done(core.ActionActivate, 1, engineDown), done(core.ActionTerminate, 0, ""), done(core.ActionRelease, 0, ""))
	if a, b := e.engine.State("cb-a"), e.engine.State("cb-b"); a != "" || b != "active" {
		t.Errorf("the engine holds %q for cb-a and %q for cb-b, want nothing and active", a, b)
	}
}

// TestOutboxBackoff: the wait after each failed try doubles from
// FirstRetry up to MaxRetry, jittered.
func TestOutboxBackoff(t *testing.T) {
	exact := OutboxOptions{Jitter: func(d time.Duration) time.Duration { return d }}.withDefaults()
	var got []time.Duration
	for attempts := 1; attempts <= 12; attempts++ {
		got = append(got, exact.backoff(attempts))
	}
	s := time.Second
	want := []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 300 * s, 300 * s, 300 * s}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits by attempt (-want +got):\n%s", diff)
	}
	// A thousandth of the attempts would overflow a doubling without a cap.
	if got := exact.backoff(1000); got != 5*time.Minute {
		t.Errorf("wait after 1000 tries: %s, want 5m", got)
	}
	// The default jitter moves a wait by up to a fifth either way, and
	// does move it.
	jittered := OutboxOptions{}.withDefaults()
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered.backoff(3)
		if d < 3200*time.Millisecond || d > 4800*time.Millisecond {
			t.Fatalf("jittered wait after 3 tries: %s, want within 4s ± 0.8s", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("1000 jittered waits took %d values only", len(seen))
	}
	// A wait is never zero, so that a failed action is not due again in
	// the pass that failed it.
	if got := (OutboxOptions{Jitter: func(time.Duration) time.Duration { return 0 }}).withDefaults().backoff(1); got <= 0 {
		t.Errorf("a wait jittered to nothing: %s, want above 0", got)
	}
}

// TestOutboxGivesUp: an action that keeps failing fails for good at the
// bound (a day of tries by default, or MaxAttempts), or at once for an
// error that no retry mends; the next action of its block then runs.
func TestOutboxGivesUp(t *testing.T) {
	permanent := fmt.Errorf("%w: the engine refuses this block", backend.ErrPermanent)
	tests := map[string]struct {
		opts         OutboxOptions
		err          error
		wantAttempts int
		wantAt       float64 // seconds after the first try
	}{
		// Tries at 0, 1, 3, 7, ..., 255, 511 s, then every 5 minutes: the
		// first at or past 24h is at 86611 s, the 297th.
		"a day of failures": {err: errEngineDown, wantAttempts: 297, wantAt: 86611},
		"max attempts":      {opts: OutboxOptions{MaxAttempts: 3}, err: errEngineDown, wantAttempts: 3, wantAt: 3},
		"no retry mends it": {err: permanent, wantAttempts: 1, wantAt: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newOutboxEnv(t, tc.opts, wholeNode("cb-a", "n0", 2, 10))
			e.be.FailNext(core.ActionActivate, 1000, tc.err)
			e.reconcileAt(2)
			if _, err := e.svc.CancelBlock(t.Context(), "t", "cb-a"); err != nil {
				t.Fatal(err)
			}
			e.pass(0)
			for passes := 1; ; passes++ {
				as, err := e.st.ActionsFor(t.Context(), "cb-a")
				if err != nil {
					t.Fatal(err)
				}
				if as[0].State != core.ActionPending {
					break
				}
				if passes > 1000 {
					t.Fatalf("still pending after %d passes: %+v", passes, as[0])
				}
				if as[1].State != core.ActionPending || as[1].Attempts != 0 {
					t.Fatalf("the release ran while the activation was pending: %+v", as[1])
				}
				e.pass(as[0].NextAt.Sub(e.wall.Now())) // to its next try
			}
			lastErr := "activate of block cb-a on the sim backend: " + tc.err.Error()
			e.wantStatus("given up", "cb-a",
				shownAction{Kind: core.ActionActivate, State: core.ActionFailed, Attempts: tc.wantAttempts, LastError: lastErr, Next: -1, Done: tc.wantAt},
				shownAction{Kind: core.ActionRelease, State: core.ActionDone, Next: -1, Done: tc.wantAt})
			if got := len(e.be.Calls()); got != tc.wantAttempts+1 {
				t.Errorf("%d backend calls, want %d tries and the release", got, tc.wantAttempts)
			}
			if pending, failed := e.gauges(); pending != 0 || failed != 1 {
				t.Errorf("gauges: %v pending, %v failed; want 0 and 1", pending, failed)
			}
		})
	}
}

// gauges returns the values of the engine actions' gauges that the
// service's collectors report.
func (e *outboxEnv) gauges() (pending, failed float64) {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.svc.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	pending, failed = -1, -1
	for _, mf := range mfs {
		switch mf.GetName() {
		case "capblock_engine_actions_pending":
			pending = mf.GetMetric()[0].GetGauge().GetValue()
		case "capblock_engine_actions_failed":
			failed = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return pending, failed
}

// gauge returns the value of the unlabelled gauge name that the
// service's collectors report, or -1 when they report none.
func (e *outboxEnv) gauge(name string) float64 {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.svc.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// TestOutboxMetrics: the gauges count the actions pending (due, retried,
// or waiting behind another) and those given up on.
func TestOutboxMetrics(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{Parallel: 1}, wholeNode("cb-a", "n0", 2, 10), wholeNode("cb-b", "n1", 2, 10))
	steps := []struct {
		name                    string
		do                      func()
		wantPending, wantFailed float64
		wantOverdue             float64 // seconds
	}{
		{"none yet", func() {}, 0, 0, 0},
		{"two activations stored", func() { e.reconcileAt(2) }, 2, 0, 0},
		{"left untaken for 90 s", func() {
			if _, err := e.wall.Advance(90 * time.Second); err != nil {
				t.Fatal(err)
			}
		}, 2, 0, 90},
		// The retried one is due later: not overdue yet.
		{"one given up on, the other retried", func() {
			e.be.FailNext(core.ActionActivate, 1, backend.ErrPermanent)
			e.be.FailNext(core.ActionActivate, 1, errEngineDown)
			e.pass(0)
		}, 1, 1, 0},
		{"the blocks end: cb-b's steps wait behind its activation", func() { e.reconcileAt(10) }, 5, 1, 0},
		{"all applied", func() { e.pass(time.Second) }, 0, 1, 0},
	}
	for _, st := range steps {
		st.do()
		if pending, failed := e.gauges(); pending != st.wantPending || failed != st.wantFailed {
			t.Errorf("%s: %v pending, %v failed; want %v and %v", st.name, pending, failed, st.wantPending, st.wantFailed)
		}
		if got := e.gauge("capblock_engine_actions_overdue_seconds"); got != st.wantOverdue {
			t.Errorf("%s: overdue %v s, want %v", st.name, got, st.wantOverdue)
		}
	}
	// The two failed tries, one given up on and one retried, are counted;
	// every kind is reported from the start.
	mfs, err := collectorsOf(e).Gather()
	if err != nil {
		t.Fatal(err)
	}
	tries := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "capblock_engine_action_failures_total" {
			for _, m := range mf.GetMetric() {
				tries[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"reserve": 0, "activate": 2, "terminate": 0, "release": 0, "start-instance": 0, "stop-instance": 0}
	if !maps.Equal(tries, want) {
		t.Errorf("failed tries by kind: %v, want %v", tries, want)
	}
}

// collectorsOf is a registry of the service's collectors.
func collectorsOf(e *outboxEnv) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(e.svc.Collectors()...)
	return r
}

// stuck is a backend whose calls hang until their context ends; entered
// receives each block it is called for.
type stuck struct{ entered chan string }

func (stuck) Name() string                                   { return "stuck" }
func (stuck) Inventory(context.Context) ([]core.Node, error) { return nil, nil }
func (s stuck) Activate(ctx context.Context, b core.Block) error {
	s.entered <- b.ID
	<-ctx.Done()
	return ctx.Err()
}
func (s stuck) Terminate(ctx context.Context, b core.Block) error { return s.Activate(ctx, b) }
func (s stuck) Release(ctx context.Context, b core.Block) error   { return s.Activate(ctx, b) }

// TestOutboxStoppedMidCall: a worker stopped while the backend takes an
// action (the lead lost, the server shutting down) records nothing of
// it: the action stays pending, as stored, and the next worker applies
// it once.
func TestOutboxStoppedMidCall(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{}, wholeNode("cb-a", "n0", 2, 10))
	e.reconcileAt(2)
	s := stuck{entered: make(chan string)}
	e.svc.backend = s
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- e.w.pass(ctx) }()
	<-s.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the pass ended with %v, want it cut off", err)
	}
	e.wantStatus("cut off", "cb-a", shownAction{Kind: core.ActionActivate, State: core.ActionPending, Next: 0, Done: -1})
	e.svc.backend = e.be
	e.pass(0)
	e.wantStatus("next worker", "cb-a", shownAction{Kind: core.ActionActivate, State: core.ActionDone, Next: -1, Done: 0})
	e.wantCalls("next worker", backendtest.Call{Kind: core.ActionActivate, Block: "cb-a"})
}

// TestOutboxPrunesDoneActions: the worker removes the done actions of
// over a week ago, hourly; those pending or failed stay.
func TestOutboxPrunesDoneActions(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{Parallel: 1}, wholeNode("cb-a", "n0", 2, 10), wholeNode("cb-b", "n1", 2, 10), wholeNode("cb-c", "n0", 12, 20))
	e.reconcileAt(2)
	e.be.FailNext(core.ActionActivate, 1, backend.ErrPermanent)
	e.pass(0) // cb-a's activation fails for good, cb-b's is done
	e.reconcileAt(12)
	e.be.FailNext(core.ActionActivate, 1, errEngineDown)
	e.pass(0) // cb-c's is retried
	kinds := func() map[string][]core.ActionState {
		out := map[string][]core.ActionState{}
		for _, id := range []string{"cb-a", "cb-b", "cb-c"} {
			as, err := e.st.ActionsFor(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				out[id] = append(out[id], a.State)
			}
		}
		return out
	}
	ctx := t.Context()
	var last time.Time
	steps := []struct {
		name    string
		advance time.Duration
		want    map[string][]core.ActionState
	}{
		// cb-a and cb-b's terminations and releases (hour 12) are done too.
		{"at once", 0, map[string][]core.ActionState{
			"cb-a": {core.ActionFailed, core.ActionDone, core.ActionDone}, "cb-b": {core.ActionDone, core.ActionDone, core.ActionDone},
			"cb-c": {core.ActionPending}}},
		{"a week later, not older", 7 * 24 * time.Hour, map[string][]core.ActionState{
			"cb-a": {core.ActionFailed, core.ActionDone, core.ActionDone}, "cb-b": {core.ActionDone, core.ActionDone, core.ActionDone},
			"cb-c": {core.ActionPending}}},
		{"older, but not an hour since", 30 * time.Minute, map[string][]core.ActionState{
			"cb-a": {core.ActionFailed, core.ActionDone, core.ActionDone}, "cb-b": {core.ActionDone, core.ActionDone, core.ActionDone},
			"cb-c": {core.ActionPending}}},
		{"an hour since", 30 * time.Minute, map[string][]core.ActionState{
			"cb-a": {core.ActionFailed}, "cb-c": {core.ActionPending}}},
	}
	for _, st := range steps {
		if _, err := e.wall.Advance(st.advance); err != nil {
			t.Fatal(err)
		}
		last = e.w.prune(ctx, last)
		if diff := cmp.Diff(st.want, kinds()); diff != "" {
			t.Errorf("%s: actions kept (-want +got):\n%s", st.name, diff)
		}
	}
}

// stopping is a backend that takes each call and, in it, stops the worker
// that made it.
type stopping struct{ stop context.CancelFunc }

func (stopping) Name() string                                        { return "stopping" }
func (stopping) Inventory(context.Context) ([]core.Node, error)      { return nil, nil }
func (s stopping) Activate(context.Context, core.Block) error        { s.stop(); return nil }
func (s stopping) Terminate(ctx context.Context, b core.Block) error { return s.Activate(ctx, b) }
func (s stopping) Release(ctx context.Context, b core.Block) error   { return s.Activate(ctx, b) }

// TestOutboxStoppedAfterEngineTookIt: a worker told to stop while the
// engine takes an action that it then takes still records it done, so
// that the next worker does not repeat it.
func TestOutboxStoppedAfterEngineTookIt(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{}, wholeNode("cb-a", "n0", 2, 10))
	e.reconcileAt(2)
	ctx, cancel := context.WithCancel(t.Context())
	e.svc.backend = stopping{stop: cancel}
	if err := e.w.pass(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("the pass ended with %v, want it stopped", err)
	}
	e.wantStatus("stopped", "cb-a", shownAction{Kind: core.ActionActivate, State: core.ActionDone, Next: -1, Done: 0})
}

// hangsFor is a backend whose calls for one block hang until their
// context ends, and whose others go to next.
type hangsFor struct {
	backend.Backend
	block   string
	entered chan string
}

func (h hangsFor) Activate(ctx context.Context, b core.Block) error {
	if b.ID == h.block {
		return stuck{h.entered}.Activate(ctx, b)
	}
	return h.Backend.Activate(ctx, b)
}

// TestOutboxSlowSubjectHoldsUpOnlyItself: while one block's activation
// hangs, the other blocks' actions are applied and recorded without
// waiting for it: each of cb-b's steps falls due once the one before is
// done, and is taken then, not once every action in flight is done.
func TestOutboxSlowSubjectHoldsUpOnlyItself(t *testing.T) {
	e := newOutboxEnv(t, OutboxOptions{Parallel: 2, CallTimeout: time.Minute},
		wholeNode("cb-a", "n0", 2, 10), wholeNode("cb-b", "n1", 2, 3), wholeNode("cb-c", "n2", 2, 10))
	e.reconcileAt(4) // cb-b has begun and ended: its activation, termination and release
	h := hangsFor{Backend: e.be, block: "cb-a", entered: make(chan string, 1)}
	e.svc.backend = h
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.w.pass(ctx) }()
	<-h.entered
	// With two at a time, cb-b's three steps and cb-c's activation are
	// recorded while cb-a's hangs in one of the two.
	waitFor(t, 10*time.Second, "cb-b's and cb-c's actions recorded", func() bool {
		return e.allDone("cb-b") == 3 && e.allDone("cb-c") == 1
	})
	if got := e.actionState("cb-a"); got != core.ActionPending {
		t.Errorf("cb-a's activation is %s while its call hangs", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the pass ended with %v, want it cut off", err)
	}
}

// actionState is the state of a block's first action.
func (e *outboxEnv) actionState(id string) core.ActionState {
	as, err := e.st.ActionsFor(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(as) == 0 {
		return ""
	}
	return as[0].State
}

// allDone is how many of a block's actions are done, or -1 when one is
// not.
func (e *outboxEnv) allDone(id string) int {
	as, err := e.st.ActionsFor(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, a := range as {
		if a.State != core.ActionDone {
			return -1
		}
	}
	return len(as)
}
