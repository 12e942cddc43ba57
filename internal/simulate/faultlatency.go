package simulate

import (
	"math/rand/v2"
	"time"
)

// A slow store. A commit takes time: the service decided at t (a quote
// still valid, a step not yet due), and its change becomes durable, or
// its answer comes back, at t+d. In the simulation the time a commit
// takes is the simulated clock moving during it: the service's clock
// (stored first, as an admin's move stores it, so that a restart goes
// on from it) and the outbox's, by 1 to 40 minutes, before the change
// is durable or between durable and the answer. Quotes expire while a
// purchase commits, lifecycle steps fall due while a reconcile commits.
//
// The store is slow for one operation at a time (opSlowStore), an
// operation that does not expect the clock where it left it (a move of
// the clock does: opClock checks where it is after).

// opSlowStore runs an operation on a slow store: each of its commits
// takes time at the rate CommitSlow.
func (w *world) opSlowStore() {
	ops := []func(){w.opPurchase, w.opPurchase, w.opStaleQuote, w.opRetryPending, w.opCancel, w.opExtend, w.opTransfer,
		w.opRelease, w.opPlan, w.opApprove, w.opLead, w.opNode}
	op := ops[w.rng.IntN(len(ops))]
	w.fs.setSlow(true)
	defer w.fs.setSlow(false)
	w.count("slow")
	op()
	w.note("on a slow store")
}

// slowCommit draws how long a slow commit takes, and whether it takes it
// once the change is durable (durable) or before.
func slowCommit(r *rand.Rand) (d time.Duration, durable bool) {
	return time.Duration(1+r.IntN(40)) * time.Minute, r.IntN(2) == 0
}

// commitTakes moves the clocks by d during a commit.
func (w *world) commitTakes(d time.Duration, durable bool) {
	t := w.clock.Now().Add(d)
	if _, err := w.fs.Full.SaveSimClock(w.ctx, t); err != nil {
		w.fail("storing the clock a slow commit moved: %v", err)
	}
	if _, err := w.clock.Set(t); err != nil {
		w.fail("moving the clock during a slow commit: %v", err)
	}
	if _, err := w.outbox.Advance(d); err != nil {
		w.must(err)
	}
	if durable {
		w.note("[the commit took %s once it was durable]", d)
		return
	}
	w.note("[the commit took %s before it was durable]", d)
}

// setSlow makes the store slow (true) or not.
func (f *faultStore) setSlow(slow bool) {
	f.mu.Lock()
	f.slow = slow
	f.mu.Unlock()
}
