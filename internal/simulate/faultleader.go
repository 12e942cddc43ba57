package simulate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/store"
)

// Changes of leader. The leader's lease has an epoch that grows with
// each term; the outbox claims and records actions under it, and the
// store refuses the claims and records of an epoch whose lease is no
// longer current, so that a leader that lost its lease records nothing
// (DESIGN.md, invariant 11). What it already sent the engine reaches it
// anyway: the engine's version fence keeps it from undoing a later
// write.
//
// Two servers on one SQLite file is not what the embedded store is for
// (several replicas share PostgreSQL), and the design does not keep
// two live ones apart: the lease's clock is the process's wall clock,
// and a server on a store of its own holds it under one fixed name, so
// that a second server would renew the first one's lease and lead with
// its epoch. What does happen on one file is a server that stalls
// (paused, swapped out, its call to the engine hanging) past its lease
// while another starts on the file and takes the lead: that is what
// opLeaderChange does. The leader's pass runs; its first engine call
// hangs, and meanwhile its lease expires (the world expires it through
// the store's ReleaseLease: the lease's clock cannot be moved), a new
// server starts on the file (world.crash, the old one left running) and
// leads, under the next epoch. Then the old call reaches the engine and
// the old leader goes on with its pass, deposed: each of its claims and
// records must be refused as of a lost lease (checkFences), and what
// its call wrote must not undo what the new leader wrote since (the
// engine's fence; faultEngine.took checks it). The old server is
// dropped when its pass ends.

// AcquireLease takes the leader's lease as the store does, and notes
// who holds it under which epoch.
func (f *faultStore) AcquireLease(ctx context.Context, holder string, ttl time.Duration) (store.Lease, bool, error) {
	if err := f.deadErr("acquiring the leader's lease"); err != nil {
		return store.Lease{}, false, err
	}
	l, ok, err := f.Full.AcquireLease(ctx, holder, ttl)
	if err == nil && ok {
		f.mu.Lock()
		f.holder, f.epoch = l.Holder, l.Epoch
		f.mu.Unlock()
	}
	return l, ok, err
}

// lease is the holder and epoch of the last lease taken.
func (f *faultStore) lease() (holder string, epoch int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder, f.epoch
}

// depose makes the claims and records of epoch, and of those before,
// records that the store must refuse.
func (f *faultStore) depose(epoch int64) {
	f.mu.Lock()
	f.deposed = max(f.deposed, epoch)
	f.mu.Unlock()
}

// fenced notes a claim or record under a deposed epoch that the store
// did not refuse as of a lost lease: whatever else it answered, it took
// the epoch's lease as current.
func (f *faultStore) fenced(what string, epoch int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if epoch > f.deposed || errors.Is(err, store.ErrLeaseLost) || f.unfenced != "" {
		return
	}
	f.unfenced = fmt.Sprintf("%s under epoch %d, deposed by a later term, answered %v instead of a lost lease", what, epoch, err)
}

// checkFences fails the run on a deposed leader's claim or record that
// the store took.
func (w *world) checkFences() {
	w.fs.mu.Lock()
	s := w.fs.unfenced
	w.fs.mu.Unlock()
	if s != "" {
		w.fail("a deposed leader was not fenced: %s", s)
	}
}

// opLeaderChange runs the leader's pass (its outbox clock moved, as
// opLead moves it); at the rate LeaderDeposed, its first engine call
// hangs while its lease expires and a new server takes the lead.
func (w *world) opLeaderChange() {
	d := time.Duration(1+w.rng.IntN(120)) * time.Second
	deposed := w.rng.Float64() < w.cfg.Faults.LeaderDeposed
	w.begin("lead: the outbox clock +%s; deposed while an engine call hangs: %v", d, deposed)
	w.count("leaderchange")
	if _, err := w.outbox.Advance(d); err != nil {
		w.must(err)
	}
	old := w.svc
	var (
		fired   bool
		failure any
	)
	if deposed {
		// The hook runs on the old leader's outbox goroutine: a failure
		// there is taken back to the step's.
		w.engine.setOnCall(func() {
			fired = true
			defer func() { failure = recover() }()
			w.takeOver()
		})
	}
	err := old.LeadOnce(w.ctx)
	w.engine.setOnCall(nil)
	if failure != nil {
		panic(failure)
	}
	if deposed && !fired {
		w.count("leader/idle")
		w.note("no engine call was made")
	}
	if err != nil {
		if !onlyInjected(err) {
			w.fail("the leader's work: %v", err)
		}
		w.count("leaderchange/failed")
		w.note("the old leader met %v", err)
	}
}

// takeOver expires the lease of the leader whose engine call hangs,
// starts a new server on the database file and has it lead once.
func (w *world) takeOver() {
	holder, epoch := w.fs.lease()
	w.fs.depose(epoch)
	if err := w.fs.Full.ReleaseLease(w.ctx, holder, epoch); err != nil {
		w.fail("expiring the lease of epoch %d: %v", epoch, err)
	}
	w.count("leader/deposed")
	w.crash()
	err := w.svc.LeadOnce(w.ctx)
	_, next := w.fs.lease()
	w.note("the lease of epoch %d expired; a new server leads under epoch %d", epoch, next)
	if err != nil {
		if !onlyInjected(err) {
			w.fail("the new leader's work: %v", err)
		}
		w.note("the new leader met %v", err)
	}
}

// setOnCall sets (or, with nil, clears) what runs at the next engine
// call, before the call reaches the engine.
func (e *faultEngine) setOnCall(f func()) {
	e.mu.Lock()
	e.onCall = f
	e.mu.Unlock()
}
