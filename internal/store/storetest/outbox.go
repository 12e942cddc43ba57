package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/core"
	"capblock/internal/store"
)

// outboxTests check the outbox of engine actions: written by Commit
// (Change.Actions), read and recorded by the methods of store.Outbox.
// Their records are made by a leader (fencing.go) that holds the lease
// and claims before it records; fencingTests check the fencing itself.
var outboxTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"ActionsCommitted", testActionsCommitted},
	{"ActionsTraced", testActionsTraced},
	{"ActionsRolledBack", testActionsRolledBack},
	{"ActionsInvalid", testActionsInvalid},
	{"DueActionsOnePerSubject", testDueActionsOnePerSubject},
	{"DueActionsNextAt", testDueActionsNextAt},
	{"FinishAction", testFinishAction},
	{"RetryAction", testRetryAction},
	{"FailAction", testFailAction},
	{"ActionCounts", testActionCounts},
	{"PruneActions", testPruneActions},
	{"ActionsConcurrentWorkers", testActionsConcurrentWorkers},
	{"ActionsReopen", testActionsReopen},
}

// makeAction returns a new action of team-a on subject, created and due
// at created.
func makeAction(id string, kind core.ActionKind, subject string, created time.Time) core.Action {
	return core.Action{ID: id, Kind: kind, Subject: subject, Team: "team-a",
		Payload: []byte(`{"subject":"` + subject + `","nodes":["n1"]}`), NextAt: created, CreatedAt: created}
}

// stored returns a as the store returns it after Commit: pending.
func stored(a core.Action) core.Action {
	a.State = core.ActionPending
	return a
}

// actions is the change that stores as alone.
func actions(as ...core.Action) store.Change { return store.Change{Actions: as} }

// wantActions fails the test unless ActionsFor(subject) returns want.
func wantActions(t *testing.T, s store.Full, subject string, want ...core.Action) {
	t.Helper()
	got, err := s.ActionsFor(t.Context(), subject)
	mustDo(t, "ActionsFor("+subject+")", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("ActionsFor(%s) (-want +got):\n%s", subject, diff)
	}
}

// wantDue fails the test unless DueActions(now, limit) returns the
// actions of ids, in that order.
func wantDue(t *testing.T, s store.Full, now time.Time, limit int, ids ...string) []core.Action {
	t.Helper()
	due, err := s.DueActions(t.Context(), now, limit)
	mustDo(t, "DueActions", err)
	got := make([]string, len(due))
	for i, a := range due {
		got[i] = a.ID
	}
	if diff := cmp.Diff(ids, got, cmpOpts...); diff != "" {
		t.Fatalf("DueActions(%s, %d) ids (-want +got):\n%s", now.Format(time.RFC3339Nano), limit, diff)
	}
	return due
}

// testActionsCommitted: the actions of a change are stored with it,
// pending, every field as given, times to the microsecond.
func testActionsCommitted(t *testing.T, h Harness) {
	s := h.Open(t)
	b := makeBlock("b1").on("n1", 0).obj()
	created := hour(-1).Add(123_456_789 * time.Nanosecond)
	activate := makeAction("act-1", core.ActionActivate, "b1", created)
	activate.NextAt = hour(0)
	release := makeAction("act-2", core.ActionRelease, "b1", created)
	release.Payload = nil
	release.State = core.ActionPending // as good as empty
	c := purchase(b, "tok-1")
	c.Actions = []core.Action{activate, release}
	mustCommit(t, s, c)

	activate.CreatedAt = hour(-1).Add(123_456 * time.Microsecond)
	release.CreatedAt, release.NextAt = activate.CreatedAt, activate.CreatedAt
	wantActions(t, s, "b1", stored(activate), stored(release))
	wantActions(t, s, "b2")
	// The store keeps the order of a change's actions, whatever their ids.
	mustCommit(t, s, actions(makeAction("z", core.ActionStartInstance, "job-1/run-1", hour(0)),
		makeAction("a", core.ActionStopInstance, "job-1/run-1", hour(0))))
	wantActions(t, s, "job-1/run-1",
		stored(makeAction("z", core.ActionStartInstance, "job-1/run-1", hour(0))),
		stored(makeAction("a", core.ActionStopInstance, "job-1/run-1", hour(0))))
}

// testActionsTraced: an action keeps the trace context of the decision
// that stored it, the commit's context's unless it names its own, so
// that its application continues that trace.
func testActionsTraced(t *testing.T, h Harness) {
	s := h.Open(t)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	own := makeAction("act-own", core.ActionActivate, "b2", hour(0))
	own.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	decided := makeAction("act-decided", core.ActionActivate, "b1", hour(0))
	if err := s.Commit(ctx, actions(decided, own)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if decided.Trace != "" {
		t.Errorf("Commit wrote the trace into the caller's action")
	}
	decided.Trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	wantActions(t, s, "b1", stored(decided))
	wantActions(t, s, "b2", stored(own))
	// Without a span, nothing is traced.
	plain := makeAction("act-plain", core.ActionActivate, "b3", hour(0))
	mustCommit(t, s, actions(plain))
	wantActions(t, s, "b3", stored(plain))
	due := wantDue(t, s, hour(1), 0, "act-decided", "act-own", "act-plain")
	if due[0].Trace != decided.Trace || due[1].Trace != own.Trace || due[2].Trace != "" {
		t.Errorf("DueActions traces: %q %q %q", due[0].Trace, due[1].Trace, due[2].Trace)
	}
}

// testActionsRolledBack: a change that fails stores none of its
// actions, and a duplicate action id fails its change.
func testActionsRolledBack(t *testing.T, h Harness) {
	s := h.Open(t)
	c := insert(makeBlock("b1").on("n1", 0).obj())
	c.Actions = []core.Action{makeAction("act-1", core.ActionActivate, "b1", hour(-1))}
	mustCommit(t, s, c)

	// A double booking: the block and its action are refused together.
	c = insert(makeBlock("b2").on("n1", 0).obj())
	c.Actions = []core.Action{makeAction("act-2", core.ActionActivate, "b2", hour(-1))}
	wantConflict(t, s, c)
	wantNoBlock(t, s, "b2")
	wantActions(t, s, "b2")

	// An action id already stored is a conflict, and so is its change.
	c = insert(makeBlock("b3").on("n2", 0).obj())
	c.Actions = []core.Action{makeAction("act-3", core.ActionActivate, "b3", hour(-1)),
		makeAction("act-1", core.ActionActivate, "b3", hour(-1))}
	wantConflict(t, s, c)
	wantNoBlock(t, s, "b3")
	wantActions(t, s, "b3")
	// So is an id twice in one change.
	wantConflict(t, s, actions(makeAction("act-4", core.ActionActivate, "b4", hour(-1)),
		makeAction("act-4", core.ActionRelease, "b4", hour(-1))))
	wantActions(t, s, "b4")
	wantActions(t, s, "b1", stored(makeAction("act-1", core.ActionActivate, "b1", hour(-1))))
}

func testActionsInvalid(t *testing.T, h Harness) {
	ok := makeAction("act", core.ActionActivate, "b1", hour(0))
	tests := map[string]func(a *core.Action){
		"no id":        func(a *core.Action) { a.ID = "" },
		"unknown kind": func(a *core.Action) { a.Kind = "reboot" },
		"no subject":   func(a *core.Action) { a.Subject = "" },
		"done":         func(a *core.Action) { a.State = core.ActionDone },
		"attempts":     func(a *core.Action) { a.Attempts = 1 },
		"last error":   func(a *core.Action) { a.LastError = "earlier" },
		"ended":        func(a *core.Action) { a.DoneAt = hour(1) },
		"not JSON":     func(a *core.Action) { a.Payload = []byte("{nodes: n1}") },
	}
	s := h.Open(t)
	for name, spoil := range tests {
		t.Run(name, func(t *testing.T) {
			a := ok
			spoil(&a)
			c := insert(makeBlock("b1").on("n1", 0).obj())
			c.Actions = []core.Action{a}
			err := s.Commit(t.Context(), c)
			wantErr(t, "Commit", err, core.ErrInvalidArgument)
			wantNoBlock(t, s, "b1")
			wantActions(t, s, "b1")
		})
	}
}

// testDueActionsOnePerSubject: of each subject, only its oldest pending
// action is due; the next one once that one is done or failed. Across
// subjects, due actions come by NextAt, then CreatedAt, then id.
func testDueActionsOnePerSubject(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	// b1's actions come in three commits, the later created earlier: the
	// order stored is the order they run in.
	mustCommit(t, s, actions(makeAction("b1-activate", core.ActionActivate, "b1", hour(2))))
	mustCommit(t, s, actions(makeAction("b1-terminate", core.ActionTerminate, "b1", hour(1)),
		makeAction("b1-release", core.ActionRelease, "b1", hour(1))))
	mustCommit(t, s, actions(
		makeAction("b2-activate", core.ActionActivate, "b2", hour(1)),
		makeAction("b3-activate", core.ActionActivate, "b3", hour(2)),
		makeAction("x-b4", core.ActionActivate, "b4", hour(2)),
		makeAction("w-b5", core.ActionActivate, "b5", hour(2))))
	late := makeAction("b6-activate", core.ActionActivate, "b6", hour(0))
	late.NextAt = hour(2)
	mustCommit(t, s, actions(late))

	wantDue(t, s, hour(3), 0, "b2-activate", "b6-activate", "b1-activate", "b3-activate", "w-b5", "x-b4")
	wantDue(t, s, hour(3), 3, "b2-activate", "b6-activate", "b1-activate")
	wantDue(t, s, hour(1), 0, "b2-activate")

	l.finish("b1-activate", hour(3), true)
	wantDue(t, s, hour(3), 2, "b1-terminate", "b2-activate")
	// A failed action lets the next one of its subject run.
	mustDo(t, "FailAction", l.fail("b1-terminate", hour(3), "no such reservation"))
	wantDue(t, s, hour(3), 1, "b1-release")
	l.finish("b1-release", hour(3), true)
	wantDue(t, s, hour(3), 0, "b2-activate", "b6-activate", "b3-activate", "w-b5", "x-b4")
}

// testDueActionsNextAt: an action is not due before its NextAt, and it
// holds back the later actions of its subject meanwhile, even due ones.
func testDueActionsNextAt(t *testing.T, h Harness) {
	s := h.Open(t)
	first := makeAction("first", core.ActionActivate, "b1", hour(0))
	first.NextAt = hour(0).Add(1500 * time.Millisecond)
	mustCommit(t, s, actions(first, makeAction("second", core.ActionRelease, "b1", hour(0))))
	wantDue(t, s, hour(0), 0)
	wantDue(t, s, hour(0).Add(1499*time.Millisecond), 0)
	wantDue(t, s, first.NextAt, 0, "first")
	wantDue(t, s, hour(5), 0, "first")
}

func testFinishAction(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	a := makeAction("act-1", core.ActionActivate, "b1", hour(0))
	mustCommit(t, s, actions(a))
	at := hour(1).Add(250 * time.Millisecond)
	l.finish("act-1", at, true)
	// Again: nothing changes, not even the time.
	l.finish("act-1", hour(2), false)
	done := stored(a)
	done.State, done.DoneAt = core.ActionDone, at
	wantActions(t, s, "b1", done)
	wantDue(t, s, hour(5), 0)

	_, err := s.FinishAction(t.Context(), l.epoch, "nope", hour(1))
	wantErr(t, "FinishAction of an unknown action", err, store.ErrNotFound)

	// A failed action stays failed.
	mustCommit(t, s, actions(makeAction("act-2", core.ActionRelease, "b2", hour(0))))
	mustDo(t, "FailAction", l.fail("act-2", hour(1), "gone"))
	l.finish("act-2", hour(2), false)
	got, err := s.ActionsFor(t.Context(), "b2")
	mustDo(t, "ActionsFor", err)
	if len(got) != 1 || got[0].State != core.ActionFailed || !got[0].DoneAt.Equal(hour(1)) {
		t.Fatalf("a failed action after FinishAction: %+v, want it failed at %s", got, hour(1))
	}
}

func testRetryAction(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	a := makeAction("act-1", core.ActionActivate, "b1", hour(0))
	mustCommit(t, s, actions(a, makeAction("act-2", core.ActionRelease, "b1", hour(0))))
	next := hour(0).Add(2500 * time.Millisecond)
	mustDo(t, "RetryAction", l.retry("act-1", 1, next, "connection refused"))
	want := stored(a)
	want.Attempts, want.NextAt, want.LastError = 1, next, "connection refused"
	got, err := s.ActionsFor(t.Context(), "b1")
	mustDo(t, "ActionsFor", err)
	if diff := cmp.Diff(want, got[0], cmpOpts...); diff != "" {
		t.Fatalf("action after RetryAction (-want +got):\n%s", diff)
	}
	// Not due until its next try, and its subject's next action waits.
	wantDue(t, s, hour(0).Add(time.Second), 0)
	wantDue(t, s, next, 0, "act-1")

	// A long error that is not valid UTF-8, with a NUL byte, is stored
	// as valid UTF-8, without the NUL, cut short.
	long := "bad \xff byte\x00 " + strings.Repeat("é", 5000)
	mustDo(t, "RetryAction", l.retry("act-1", 2, next, long))
	got, err = s.ActionsFor(t.Context(), "b1")
	mustDo(t, "ActionsFor", err)
	if e := got[0].LastError; !utf8.ValidString(e) || strings.ContainsRune(e, 0) || len(e) > 2000 ||
		!strings.HasPrefix(e, "bad \uFFFD byte\uFFFD é") || got[0].Attempts != 2 {
		t.Fatalf("action after a retry with a long, invalid error: attempts %d, error of %d bytes %.40q…", got[0].Attempts, len(e), e)
	}

	err = l.retry("nope", 1, next, "x")
	wantErr(t, "RetryAction of an unknown action", err, store.ErrNotFound)
	// An action done meanwhile is not brought back.
	l.finish("act-1", hour(1), true)
	err = l.retry("act-1", 3, hour(2), "late")
	wantErr(t, "RetryAction of a done action", err, store.ErrConflict)
	got, err = s.ActionsFor(t.Context(), "b1")
	mustDo(t, "ActionsFor", err)
	if got[0].State != core.ActionDone || got[0].Attempts != 2 {
		t.Fatalf("a done action after RetryAction: %+v, want it done after 2 attempts", got[0])
	}
}

func testFailAction(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	a := makeAction("act-1", core.ActionTerminate, "b1", hour(0))
	mustCommit(t, s, actions(a))
	mustDo(t, "RetryAction", l.retry("act-1", 4, hour(1), "timeout"))
	at := hour(2).Add(time.Millisecond)
	mustDo(t, "FailAction", l.fail("act-1", at, "node gone"))
	want := stored(a)
	want.State, want.Attempts, want.NextAt, want.LastError, want.DoneAt = core.ActionFailed, 5, hour(1), "node gone", at
	wantActions(t, s, "b1", want)
	wantDue(t, s, hour(5), 0)

	err := l.fail("act-1", hour(3), "again")
	wantErr(t, "FailAction of a failed action", err, store.ErrConflict)
	err = l.fail("nope", hour(3), "x")
	wantErr(t, "FailAction of an unknown action", err, store.ErrNotFound)
	wantActions(t, s, "b1", want)
}

// wantCounts fails the test unless ActionCounts returns pending, failed.
func wantCounts(t *testing.T, s store.Full, pending, failed int64) {
	t.Helper()
	p, f, err := s.ActionCounts(t.Context())
	mustDo(t, "ActionCounts", err)
	if p != pending || f != failed {
		t.Fatalf("ActionCounts = %d pending, %d failed; want %d, %d", p, f, pending, failed)
	}
}

func testActionCounts(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	wantCounts(t, s, 0, 0)
	var as []core.Action
	for i := range 5 {
		as = append(as, makeAction(fmt.Sprintf("act-%d", i), core.ActionActivate, fmt.Sprintf("b%d", i%2), hour(0)))
	}
	mustCommit(t, s, actions(as...))
	wantCounts(t, s, 5, 0)
	l.finish("act-0", hour(1), true)
	mustDo(t, "FailAction", l.fail("act-1", hour(1), "x"))
	mustDo(t, "RetryAction", l.retry("act-2", 1, hour(2), "x"))
	wantCounts(t, s, 3, 1)
}

// testPruneActions: pruning removes the done actions that finished
// before the time given, and only those.
func testPruneActions(t *testing.T, h Harness) {
	s := h.Open(t)
	l := lead(t, s, "worker")
	var as []core.Action
	for i := range 5 {
		as = append(as, makeAction(fmt.Sprintf("act-%d", i), core.ActionActivate, fmt.Sprintf("b%d", i), hour(0)))
	}
	mustCommit(t, s, actions(as...))
	l.finish("act-0", hour(1), true)
	l.finish("act-1", hour(3), true)
	mustDo(t, "FailAction", l.fail("act-2", hour(1), "x")) // failed: kept for operators
	n, err := s.PruneActions(t.Context(), hour(1))
	mustDo(t, "PruneActions", err)
	if n != 0 {
		t.Fatalf("PruneActions at the first end pruned %d, want 0 (done at, not before)", n)
	}
	n, err = s.PruneActions(t.Context(), hour(2))
	mustDo(t, "PruneActions", err)
	if n != 1 {
		t.Fatalf("PruneActions pruned %d, want 1", n)
	}
	wantActions(t, s, "b0")
	for _, subject := range []string{"b1", "b2", "b3", "b4"} {
		got, err := s.ActionsFor(t.Context(), subject)
		mustDo(t, "ActionsFor", err)
		if len(got) != 1 {
			t.Fatalf("ActionsFor(%s) after pruning: %+v, want its action", subject, got)
		}
	}
	wantCounts(t, s, 2, 1)
}

func testActionsReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := h.Open(t)
	l := lead(t, s, "worker")
	a, b := makeAction("act-1", core.ActionActivate, "b1", hour(0)), makeAction("act-2", core.ActionRelease, "b1", hour(0))
	mustCommit(t, s, actions(a, b))
	l.finish("act-1", hour(1), true)
	s = h.Reopen(t, s)
	done := stored(a)
	done.State, done.DoneAt = core.ActionDone, hour(1)
	wantActions(t, s, "b1", done, stored(b))
	wantDue(t, s, hour(1), 0, "act-2")
}
