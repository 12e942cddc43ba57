package simulate

import "time"

// maxQuietPasses bounds the leader's passes that quiescence takes: with
// the faults off, one pass takes every lifecycle step due, and each
// further one an action that waited for its block's earlier one.
const maxQuietPasses = 50

// quiesce heals the world: the faults stop, every operation still
// waiting for its outcome is retried until it learns it, and the leader
// works (its outbox clock ten minutes on each time, past any backoff)
// until no engine action is pending.
func (w *world) quiesce() {
	w.fs.setOff(true)
	w.engine.setOff(true)
	w.wl.off = true
	w.engine.landAll() // the calls that hung reach the engine, or never will
	for len(w.m.pending) > 0 {
		p := w.m.pending[0]
		if p.tries > 20 {
			w.fail("a %s retried %d times never learnt its outcome", p.kind, p.tries)
		}
		w.retry(p)
		w.end()
		w.check()
	}
	for len(w.m.waiting) > 0 {
		p := w.m.waiting[0]
		if p.tries > 20 {
			w.fail("a %s retried %d times never learnt its outcome", p.kind, p.tries)
		}
		w.retrySeries(p)
		w.end()
		w.check()
	}
	for pass := 1; ; pass++ {
		if pass > maxQuietPasses {
			w.fail("engine actions still pending after %d passes of the leader without faults", maxQuietPasses)
		}
		w.begin("quiesce: the leader's pass %d", pass)
		if _, err := w.outbox.Advance(10 * time.Minute); err != nil {
			w.must(err)
		}
		if err := w.svc.LeadOnce(w.ctx); err != nil && !every(err, leaseLost) {
			w.fail("the leader's work without faults: %v", err)
		}
		w.end()
		w.check()
		pending, _, err := w.st.ActionCounts(w.ctx)
		w.must(err)
		if pending == 0 && w.wl.settled() {
			w.checkEngineHealth()
			w.checkJobsFinal()
			return
		}
	}
}
