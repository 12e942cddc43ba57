package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"capblock/internal/store"
)

// errInjected marks every failure the simulation injects: a caller that
// gets an error wrapping it saw a fault of the simulated world (a disk
// that failed, an answer lost, an engine that did not answer), and must
// behave as a client of a real server would: retry, or read what
// happened.
var errInjected = errors.New("injected fault")

// commitFault is what the fault store does to one Commit.
type commitFault int

const (
	commitPasses commitFault = iota
	// commitFailsBefore returns an error without calling the real
	// Commit: nothing of the change is stored.
	commitFailsBefore
	// commitLosesAnswer calls the real Commit, then returns an error
	// although the change is durable (the reply lost on its way, a
	// process killed between the fsync and the answer).
	commitLosesAnswer
	// commitDiesBefore and commitDiesAfter: the server dies during the
	// commit, before the change is durable or once it is, and answers
	// nothing more (faultcrash.go).
	commitDiesBefore
	commitDiesAfter
)

func (f commitFault) String() string {
	switch f {
	case commitFailsBefore:
		return "commit failed before it was durable"
	case commitLosesAnswer:
		return "commit durable, its answer lost"
	case commitDiesBefore:
		return "the server died during the commit, before it was durable"
	case commitDiesAfter:
		return "the server died during the commit, once it was durable"
	}
	return "commit passed"
}

// faultStore wraps the store the service runs on. Its Commit fails, or
// loses its answer, as the seed decides, and so do the outbox's records
// of the engine actions it applied (FinishAction, RetryAction); every
// other method passes through (the wrapped store.Full is embedded). The decisions come from
// one stream of the seed, drawn once per Commit: the service commits
// only on the simulation's goroutine (nothing of Run runs), so the
// order of the draws is the order of the commits.
type faultStore struct {
	store.Full

	mu    sync.Mutex
	rng   *rand.Rand
	rates Faults
	off   bool // faults are off (setup, a restart, quiescence)
	// more draws the faults added after the first ones, so that those
	// keep their stream.
	more   *rand.Rand
	counts [5]int
	// records counts the outbox's records of actions by their fault.
	records [3]int
	// events and journals count the commits asked to store events, and
	// journals: only those can have stored any.
	events, journals int
	// jobsWritten are the jobs the commits since the last look wrote.
	jobsWritten []string
	// injectedHook is told of each fault injected, for the step's
	// record: the service may hide it from its caller.
	injectedHook func(commitFault)

	// The server dying during a commit (faultcrash.go): dead is set from
	// then on until a restart swaps the store, and died until the world
	// took it.
	dead, died bool
	// A slow store (faultlatency.go): while slow is set, each commit
	// takes time at the rate CommitSlow (slowHook moves the clocks), and
	// slowed adds it up.
	slow     bool
	slowHook func(d time.Duration, durable bool)
	slowed   time.Duration
	// The lease (faultleader.go): the holder and epoch of the last lease
	// taken, the epochs up to deposed that a later term replaced, and
	// the first record or claim of one of those that the store took.
	holder   string
	epoch    int64
	deposed  int64
	unfenced string
}

func newFaultStore(rng, more *rand.Rand, rates Faults) *faultStore {
	return &faultStore{rng: rng, more: more, rates: rates}
}

// Commit draws what happens to this commit, then fails it, loses its
// answer, kills the server during it, or passes it through; a slow one
// moves the clock before it is durable, or between durable and the
// answer.
func (f *faultStore) Commit(ctx context.Context, c store.Change) error {
	if err := f.deadErr("committing"); err != nil {
		return err
	}
	fault, slow, durable := f.decide(c)
	if slow > 0 && !durable {
		f.slowHook(slow, false)
	}
	switch fault {
	case commitFailsBefore:
		return fmt.Errorf("committing: %w: the disk failed before the change was durable", errInjected)
	case commitDiesBefore:
		f.die()
		return fmt.Errorf("committing: %w: the server died before the change was durable", errInjected)
	}
	if err := f.Full.Commit(ctx, c); err != nil {
		return err
	}
	if slow > 0 && durable {
		f.slowHook(slow, true)
	}
	switch fault {
	case commitLosesAnswer:
		return fmt.Errorf("committing: %w: the change is durable, its answer was lost", errInjected)
	case commitDiesAfter:
		f.die()
		return fmt.Errorf("committing: %w: the change is durable, the server died before it answered", errInjected)
	}
	return nil
}

// decide draws the fault of one commit, and how long it takes on a slow
// store: slow, before the change is durable or after (durable).
func (f *faultStore) decide(c store.Change) (fault commitFault, slow time.Duration, durable bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Events) > 0 {
		f.events++
	}
	if len(c.Journals) > 0 {
		f.journals++
	}
	for _, jw := range c.Jobs {
		f.jobsWritten = append(f.jobsWritten, jw.Job.ID)
	}
	fault = f.draw(f.rates.CommitFails, f.rates.CommitLosesAnswer)
	if !f.off && fault == commitPasses {
		switch u := f.more.Float64(); {
		case u < f.rates.CommitCrashes/2:
			fault = commitDiesBefore
		case u < f.rates.CommitCrashes:
			fault = commitDiesAfter
		}
	}
	if !f.off && f.slow && f.more.Float64() < f.rates.CommitSlow {
		slow, durable = slowCommit(f.more)
		f.slowed += slow
	}
	f.counts[fault]++
	if fault != commitPasses && f.injectedHook != nil {
		f.injectedHook(fault)
	}
	return fault, slow, durable
}

// draw is a fault drawn at the rates given, when faults are on. f.mu
// is held.
func (f *faultStore) draw(fails, loses float64) commitFault {
	if f.off {
		return commitPasses
	}
	switch u := f.rng.Float64(); {
	case u < fails:
		return commitFailsBefore
	case u < fails+loses:
		return commitLosesAnswer
	}
	return commitPasses
}

// FinishAction records an engine action done, or fails to, or loses
// its answer, at the rates of the outbox's records: the worker must
// leave the action to be applied again, or find it done.
func (f *faultStore) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	if err := f.deadErr("recording action " + id + " done"); err != nil {
		return false, err
	}
	fault := f.decideRecord()
	if fault == commitFailsBefore {
		return false, fmt.Errorf("recording action %s done: %w: the disk failed", id, errInjected)
	}
	changed, err := f.Full.FinishAction(ctx, epoch, id, at)
	f.fenced("finishing action "+id, epoch, err)
	if err == nil && fault == commitLosesAnswer {
		return false, fmt.Errorf("recording action %s done: %w: recorded, the answer was lost", id, errInjected)
	}
	return changed, err
}

// RetryAction records a failed try of an engine action, with the faults
// of FinishAction.
func (f *faultStore) RetryAction(ctx context.Context, epoch int64, id string, attempts int, nextAt time.Time, lastErr string) error {
	if err := f.deadErr("recording a try of action " + id); err != nil {
		return err
	}
	fault := f.decideRecord()
	if fault == commitFailsBefore {
		return fmt.Errorf("recording a try of action %s: %w: the disk failed", id, errInjected)
	}
	err := f.Full.RetryAction(ctx, epoch, id, attempts, nextAt, lastErr)
	f.fenced("retrying action "+id, epoch, err)
	if err == nil && fault == commitLosesAnswer {
		return fmt.Errorf("recording a try of action %s: %w: recorded, the answer was lost", id, errInjected)
	}
	return err
}

func (f *faultStore) decideRecord() commitFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	fault := f.draw(f.rates.RecordFails, f.rates.RecordLosesAnswer)
	f.records[fault]++
	return fault
}

// setOff turns the faults off (true) or on again.
func (f *faultStore) setOff(off bool) {
	f.mu.Lock()
	f.off = off
	f.mu.Unlock()
}

// swap puts the store of a restarted service under the faults: the
// server that died is gone. It is called when no call of the service is
// in flight, or (a change of leader) while the deposed leader's waits
// for an engine call.
func (f *faultStore) swap(inner store.Full) {
	f.mu.Lock()
	f.Full, f.dead = inner, false
	f.mu.Unlock()
}

// takeJobsWritten are the jobs that commits were asked to write since
// the last call, stored or not.
func (f *faultStore) takeJobsWritten() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := f.jobsWritten
	f.jobsWritten = nil
	return ids
}

// written counts the commits asked to store events, and journals:
// events and journals are stored by such commits only, so a step that
// made none stored none.
func (f *faultStore) written() (events, journals int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events, f.journals
}

// injected counts the commits failed and those whose answers were
// lost, and as much of the outbox's records.
func (f *faultStore) injected() (failed, lost, recordsFailed, recordsLost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[commitFailsBefore], f.counts[commitLosesAnswer], f.records[commitFailsBefore], f.records[commitLosesAnswer]
}

// injectedMore counts the commits the server died in, and the time the
// slow commits took.
func (f *faultStore) injectedMore() (died int, slowed time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[commitDiesBefore] + f.counts[commitDiesAfter], f.slowed
}
