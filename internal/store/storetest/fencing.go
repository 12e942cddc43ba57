package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// fencingTests check that the outbox's claims and records take effect
// only under the current lease (store.Outbox, store.Leases).
var fencingTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"ClaimActions", testClaimActions},
	{"ClaimActionsStaleEpoch", testClaimActionsStaleEpoch},
	{"RecordsNeedTheClaim", testRecordsNeedTheClaim},
	{"RecordsOfADeposedLeader", testRecordsOfADeposedLeader},
}

// leader is a worker that holds the leader's lease for the whole test:
// before each record it claims what is due, as the outbox's worker does.
type leader struct {
	t     *testing.T
	s     store.Full
	epoch int64
}

// lead makes holder the leader of s for longer than the test.
func lead(t *testing.T, s store.Full, holder string) *leader {
	t.Helper()
	return &leader{t: t, s: s, epoch: acquire(t, s, holder, longTTL).Epoch}
}

// endOfTime is a time at which every pending action is due, whatever
// its NextAt.
var endOfTime = hour(100_000)

// claimAll claims the oldest pending action of each subject, due or not.
func (l *leader) claimAll() {
	l.t.Helper()
	_, err := l.s.ClaimActions(l.t.Context(), l.epoch, endOfTime, 0)
	mustDo(l.t, "ClaimActions", err)
}

// finish claims, then finishes id at at, and fails the test unless
// changed is want.
func (l *leader) finish(id string, at time.Time, want bool) {
	l.t.Helper()
	l.claimAll()
	changed, err := l.s.FinishAction(l.t.Context(), l.epoch, id, at)
	mustDo(l.t, "FinishAction("+id+")", err)
	if changed != want {
		l.t.Fatalf("FinishAction(%s) changed = %v, want %v", id, changed, want)
	}
}

// retry claims, then records a failed try of id.
func (l *leader) retry(id string, attempts int, nextAt time.Time, lastErr string) error {
	l.t.Helper()
	l.claimAll()
	return l.s.RetryAction(l.t.Context(), l.epoch, id, attempts, nextAt, lastErr)
}

// fail claims, then gives up on id.
func (l *leader) fail(id string, at time.Time, lastErr string) error {
	l.t.Helper()
	l.claimAll()
	return l.s.FailAction(l.t.Context(), l.epoch, id, at, lastErr)
}

// wantClaimed fails the test unless ClaimActions(epoch, now, limit)
// returns the actions of ids, in that order.
func wantClaimed(t *testing.T, s store.Full, epoch int64, now time.Time, limit int, ids ...string) []core.Action {
	t.Helper()
	claimed, err := s.ClaimActions(t.Context(), epoch, now, limit)
	mustDo(t, fmt.Sprintf("ClaimActions(%d)", epoch), err)
	got := make([]string, len(claimed))
	for i, a := range claimed {
		got[i] = a.ID
	}
	if diff := cmp.Diff(ids, got, cmpOpts...); diff != "" {
		t.Fatalf("ClaimActions(%d, %s, %d) ids (-want +got):\n%s", epoch, now.Format(time.RFC3339Nano), limit, diff)
	}
	return claimed
}

// testClaimActions: a current epoch claims what DueActions returns, in
// its order and with every field, and the claim changes nothing else.
func testClaimActions(t *testing.T, h Harness) {
	s := h.Open(t)
	b1 := makeAction("b1-activate", core.ActionActivate, "b1", hour(0))
	b1.Payload = nil
	later := makeAction("b2-activate", core.ActionActivate, "b2", hour(-1))
	later.NextAt = hour(2)
	mustCommit(t, s, actions(b1, makeAction("b1-release", core.ActionRelease, "b1", hour(0)), later,
		makeAction("b3-activate", core.ActionActivate, "b3", hour(0))))

	_, err := s.ClaimActions(t.Context(), 0, hour(3), 0)
	wantLeaseLost(t, "ClaimActions before any term", err)
	l := lead(t, s, "a")
	_, err = s.ClaimActions(t.Context(), l.epoch+1, hour(3), 0)
	wantLeaseLost(t, "ClaimActions of an epoch to come", err)

	wantClaimed(t, s, l.epoch, hour(0), 1, "b1-activate")
	due := wantDue(t, s, hour(3), 0, "b1-activate", "b3-activate", "b2-activate")
	claimed := wantClaimed(t, s, l.epoch, hour(3), 0, "b1-activate", "b3-activate", "b2-activate")
	if diff := cmp.Diff(due, claimed, cmpOpts...); diff != "" {
		t.Fatalf("ClaimActions returned other actions than DueActions (-due +claimed):\n%s", diff)
	}
	wantActions(t, s, "b1", stored(b1), stored(makeAction("b1-release", core.ActionRelease, "b1", hour(0))))
	wantClaimed(t, s, l.epoch, hour(3), 0, "b1-activate", "b3-activate", "b2-activate") // again: the same
	wantClaimed(t, s, l.epoch, hour(-2), 0)

	changed, err := s.FinishAction(t.Context(), l.epoch, "b1-activate", hour(3))
	mustDo(t, "FinishAction of a claimed action", err)
	if !changed {
		t.Fatalf("FinishAction of an action claimed under a current lease changed nothing")
	}
	wantClaimed(t, s, l.epoch, hour(3), 2, "b1-release", "b3-activate")
}

// testClaimActionsStaleEpoch: an epoch whose lease expired, or was
// followed by another term, claims nothing; the current one claims
// what the stale one had claimed.
func testClaimActionsStaleEpoch(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, actions(makeAction("act-1", core.ActionActivate, "b1", hour(0)),
		makeAction("act-2", core.ActionActivate, "b2", hour(0))))
	old := acquire(t, s, "a", shortTTL)
	wantClaimed(t, s, old.Epoch, hour(1), 1, "act-1")
	time.Sleep(outlive)
	_, err := s.ClaimActions(t.Context(), old.Epoch, hour(1), 0)
	wantLeaseLost(t, "ClaimActions after the lease expired", err)

	l := lead(t, s, "b")
	_, err = s.ClaimActions(t.Context(), old.Epoch, hour(1), 0)
	wantLeaseLost(t, "ClaimActions after another term began", err)
	// The stale claims made nothing the new leader's: it must claim.
	changed, err := s.FinishAction(t.Context(), l.epoch, "act-2", hour(1))
	mustDo(t, "FinishAction of an action the new epoch did not claim", err)
	if changed {
		t.Fatalf("FinishAction of act-2, which the stale epoch failed to claim, changed it under epoch %d", l.epoch)
	}
	wantClaimed(t, s, l.epoch, hour(1), 0, "act-1", "act-2")
	l.finish("act-1", hour(1), true)
	l.finish("act-2", hour(1), true)
	wantCounts(t, s, 0, 0)
}

// testRecordsNeedTheClaim: under a current lease, an action that its
// epoch did not claim is as good as gone: FinishAction changes nothing,
// RetryAction and FailAction are conflicts, and the action stays as it
// was; an unknown action is still not found.
func testRecordsNeedTheClaim(t *testing.T, h Harness) {
	s := h.Open(t)
	a := makeAction("act-1", core.ActionActivate, "b1", hour(0))
	mustCommit(t, s, actions(a))
	first := acquire(t, s, "a", longTTL)
	wantClaimed(t, s, first.Epoch, hour(1), 0, "act-1")
	mustDo(t, "ReleaseLease", s.ReleaseLease(t.Context(), "a", first.Epoch))
	epoch := acquire(t, s, "b", longTTL).Epoch // act-1 is still claimed by the first term

	changed, err := s.FinishAction(t.Context(), epoch, "act-1", hour(1))
	mustDo(t, "FinishAction of an action of another epoch", err)
	if changed {
		t.Fatalf("FinishAction of an action that epoch %d claimed changed it under epoch %d", first.Epoch, epoch)
	}
	err = s.RetryAction(t.Context(), epoch, "act-1", 1, hour(2), "x")
	wantErr(t, "RetryAction of an action of another epoch", err, store.ErrConflict)
	err = s.FailAction(t.Context(), epoch, "act-1", hour(2), "x")
	wantErr(t, "FailAction of an action of another epoch", err, store.ErrConflict)
	_, err = s.FinishAction(t.Context(), epoch, "nope", hour(1))
	wantErr(t, "FinishAction of an unknown action", err, store.ErrNotFound)
	wantActions(t, s, "b1", stored(a))

	wantClaimed(t, s, epoch, hour(1), 0, "act-1")
	mustDo(t, "RetryAction once claimed", s.RetryAction(t.Context(), epoch, "act-1", 1, hour(2), "x"))
}

// testRecordsOfADeposedLeader: a leader whose lease expired, and then
// another replica took a term, records nothing, whatever it had
// claimed: every record is refused with ErrLeaseLost (not a conflict),
// unknown actions too, and the actions stay as they were, for the new
// leader to claim and record.
func testRecordsOfADeposedLeader(t *testing.T, h Harness) {
	s := h.Open(t)
	var as []core.Action
	for i := 1; i <= 4; i++ {
		as = append(as, makeAction(fmt.Sprintf("act-%d", i), core.ActionActivate, fmt.Sprintf("b%d", i), hour(0)))
	}
	mustCommit(t, s, actions(as...))
	old := acquire(t, s, "a", shortTTL)
	wantClaimed(t, s, old.Epoch, hour(1), 0, "act-1", "act-2", "act-3", "act-4")
	time.Sleep(outlive)

	// Expired: nothing is recorded, though no other term began yet.
	changed, err := s.FinishAction(t.Context(), old.Epoch, "act-4", hour(1))
	wantLeaseLost(t, "FinishAction after the lease expired", err)
	if changed {
		t.Fatalf("FinishAction after the lease expired reported a change")
	}

	l := lead(t, s, "b")
	changed, err = s.FinishAction(t.Context(), old.Epoch, "act-1", hour(1))
	wantLeaseLost(t, "FinishAction of a deposed leader", err)
	if changed {
		t.Fatalf("FinishAction of a deposed leader reported a change")
	}
	wantLeaseLost(t, "RetryAction of a deposed leader", s.RetryAction(t.Context(), old.Epoch, "act-2", 1, hour(2), "late"))
	wantLeaseLost(t, "FailAction of a deposed leader", s.FailAction(t.Context(), old.Epoch, "act-3", hour(1), "late"))
	_, err = s.FinishAction(t.Context(), old.Epoch, "nope", hour(1))
	wantLeaseLost(t, "FinishAction of an unknown action by a deposed leader", err)
	for _, a := range as {
		wantActions(t, s, a.Subject, stored(a))
	}

	// The new leader claims them and records each outcome.
	wantClaimed(t, s, l.epoch, hour(1), 0, "act-1", "act-2", "act-3", "act-4")
	changed, err = s.FinishAction(t.Context(), l.epoch, "act-1", hour(1))
	if err != nil || !changed {
		t.Fatalf("FinishAction of the new leader: changed %v, err %v; want it done", changed, err)
	}
	mustDo(t, "RetryAction of the new leader", s.RetryAction(t.Context(), l.epoch, "act-2", 1, hour(2), "busy"))
	mustDo(t, "FailAction of the new leader", s.FailAction(t.Context(), l.epoch, "act-3", hour(1), "gone"))
	wantCounts(t, s, 2, 1)
	done, retried, failed := stored(as[0]), stored(as[1]), stored(as[2])
	done.State, done.DoneAt = core.ActionDone, hour(1)
	retried.Attempts, retried.NextAt, retried.LastError = 1, hour(2), "busy"
	failed.State, failed.Attempts, failed.LastError, failed.DoneAt = core.ActionFailed, 1, "gone", hour(1)
	wantActions(t, s, "b1", done)
	wantActions(t, s, "b2", retried)
	wantActions(t, s, "b3", failed)
	wantHeldBy(t, s, "a", "b", l.epoch)
}

// testActionsConcurrentWorkers runs 4 workers at once, each on a
// replica of its own, that take the lead term after term: the one that
// wins the lease (the others are refused meanwhile) claims a page of due
// actions, finishes them and releases the lease. In every third term
// the worker is deposed before it records: it releases the lease first,
// so that the next term may begin while it still finishes, and every
// one of its records must be refused, leaving the actions to a later
// term. So only the current epoch's worker records outcomes: every
// action is finished exactly once, by the term that claimed it, each
// term takes the next epoch, and no action is claimed before every
// older one of its subject is done.
func testActionsConcurrentWorkers(t *testing.T, h Harness) {
	const workers, subjects, perSubject = 4, 10, 4
	s := h.Open(t)
	kinds := []core.ActionKind{core.ActionActivate, core.ActionTerminate, core.ActionRelease, core.ActionRelease}
	// The id of a subject's i-th action ends in perSubject-1-i, so that
	// the ids sort against the order the actions must run in.
	id := func(subject, i int) string { return fmt.Sprintf("b%d-%d", subject, perSubject-1-i) }
	var as []core.Action
	for i := range perSubject {
		for j := range subjects {
			as = append(as, makeAction(id(j, i), kinds[i], fmt.Sprintf("b%d", j), hour(0)))
		}
	}
	mustCommit(t, s, actions(as...))
	stores := []store.Full{s}
	for len(stores) < workers {
		stores = append(stores, replica(t, h, s))
	}
	var (
		mu        sync.Mutex
		done      = map[string]bool{} // finished by a current epoch
		finished  = map[string]int{}  // how many times
		epochs    []int64             // the terms won
		refused   int                 // records of deposed workers refused
		problems  []string            // out of order, or fencing broken
		remaining atomic.Int64        // actions not done yet
		broken    atomic.Bool         // a problem: the workers stop
		wg        sync.WaitGroup
		problem   = func(format string, args ...any) {
			mu.Lock()
			problems = append(problems, fmt.Sprintf(format, args...))
			mu.Unlock()
			broken.Store(true)
		}
	)
	remaining.Store(int64(len(as)))
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			r, holder := stores[w], fmt.Sprintf("worker-%d", w)
			<-start
			for remaining.Load() > 0 && !broken.Load() && !t.Failed() {
				l, ok, err := r.AcquireLease(t.Context(), holder, longTTL)
				if err != nil {
					t.Errorf("AcquireLease(%s): %v", holder, err)
					return
				}
				if !ok {
					time.Sleep(time.Millisecond) // another leads: look again
					continue
				}
				mu.Lock()
				epochs = append(epochs, l.Epoch)
				mu.Unlock()
				due, err := r.ClaimActions(t.Context(), l.Epoch, hour(1), 3)
				if err != nil {
					t.Errorf("ClaimActions(%d) of the current term: %v", l.Epoch, err)
					return
				}
				mu.Lock()
				for _, a := range due {
					var subject, suffix int
					fmt.Sscanf(a.ID, "b%d-%d", &subject, &suffix)
					for older := range perSubject - 1 - suffix {
						if o := id(subject, older); !done[o] {
							problems = append(problems, fmt.Sprintf("%s was claimed before %s was done", a.ID, o))
							broken.Store(true)
						}
					}
				}
				mu.Unlock()
				deposed := l.Epoch%3 == 0
				release := func() bool {
					if err := r.ReleaseLease(t.Context(), holder, l.Epoch); err != nil {
						t.Errorf("ReleaseLease(%s, %d): %v", holder, l.Epoch, err)
						return false
					}
					return true
				}
				if deposed && !release() {
					return
				}
				for _, a := range due {
					changed, err := r.FinishAction(t.Context(), l.Epoch, a.ID, hour(1))
					switch {
					case deposed && errors.Is(err, store.ErrLeaseLost) && !changed:
						mu.Lock()
						refused++
						mu.Unlock()
					case deposed:
						problem("deposed epoch %d finishing %s: changed %v, error %v; want ErrLeaseLost", l.Epoch, a.ID, changed, err)
					case err != nil || !changed:
						problem("epoch %d, current, finishing %s that it claimed: changed %v, error %v", l.Epoch, a.ID, changed, err)
					default:
						mu.Lock()
						done[a.ID] = true
						finished[a.ID]++
						mu.Unlock()
						remaining.Add(-1)
					}
				}
				if !deposed && !release() {
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(problems) > 0 {
		t.Fatalf("%d problems: %s", len(problems), strings.Join(problems, "; "))
	}
	for _, a := range as {
		if finished[a.ID] != 1 {
			t.Errorf("action %s was finished %d times, want once", a.ID, finished[a.ID])
		}
	}
	slices.Sort(epochs)
	for i, e := range epochs {
		if e != int64(i+1) {
			t.Fatalf("the terms won took epochs %v, want 1, 2, 3, … each once", epochs)
		}
	}
	if refused == 0 {
		t.Errorf("no deposed worker tried to record (%d terms): the test proved nothing of fencing", len(epochs))
	}
	wantCounts(t, s, 0, 0)
}
