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
)

func (f commitFault) String() string {
	switch f {
	case commitFailsBefore:
		return "commit failed before it was durable"
	case commitLosesAnswer:
		return "commit durable, its answer lost"
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

	mu     sync.Mutex
	rng    *rand.Rand
	rates  Faults
	off    bool // faults are off (setup, a restart, quiescence)
	counts [3]int
	// records counts the outbox's records of actions by their fault.
	records [3]int
	// events and journals count the commits asked to store events, and
	// journals: only those can have stored any.
	events, journals int
	// injectedHook is told of each fault injected, for the step's
	// record: the service may hide it from its caller.
	injectedHook func(commitFault)
}

func newFaultStore(rng *rand.Rand, rates Faults) *faultStore {
	return &faultStore{rng: rng, rates: rates}
}

// Commit draws what happens to this commit, then fails it, loses its
// answer, or passes it through.
func (f *faultStore) Commit(ctx context.Context, c store.Change) error {
	fault := f.decide(c)
	switch fault {
	case commitFailsBefore:
		return fmt.Errorf("committing: %w: the disk failed before the change was durable", errInjected)
	case commitLosesAnswer:
		if err := f.Full.Commit(ctx, c); err != nil {
			return err
		}
		return fmt.Errorf("committing: %w: the change is durable, its answer was lost", errInjected)
	}
	return f.Full.Commit(ctx, c)
}

func (f *faultStore) decide(c store.Change) commitFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(c.Events) > 0 {
		f.events++
	}
	if len(c.Journals) > 0 {
		f.journals++
	}
	fault := f.draw(f.rates.CommitFails, f.rates.CommitLosesAnswer)
	f.counts[fault]++
	if fault != commitPasses && f.injectedHook != nil {
		f.injectedHook(fault)
	}
	return fault
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
	fault := f.decideRecord()
	if fault == commitFailsBefore {
		return false, fmt.Errorf("recording action %s done: %w: the disk failed", id, errInjected)
	}
	changed, err := f.Full.FinishAction(ctx, epoch, id, at)
	if err == nil && fault == commitLosesAnswer {
		return false, fmt.Errorf("recording action %s done: %w: recorded, the answer was lost", id, errInjected)
	}
	return changed, err
}

// RetryAction records a failed try of an engine action, with the faults
// of FinishAction.
func (f *faultStore) RetryAction(ctx context.Context, epoch int64, id string, attempts int, nextAt time.Time, lastErr string) error {
	fault := f.decideRecord()
	if fault == commitFailsBefore {
		return fmt.Errorf("recording a try of action %s: %w: the disk failed", id, errInjected)
	}
	err := f.Full.RetryAction(ctx, epoch, id, attempts, nextAt, lastErr)
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

// swap puts the store of a restarted service under the faults. It is
// called between steps, when no call of the service is in flight.
func (f *faultStore) swap(inner store.Full) { f.Full = inner }

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
