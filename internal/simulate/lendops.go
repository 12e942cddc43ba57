package simulate

import (
	"errors"

	"capblock/internal/core"
)

// Lending: a block's holder lends its GPUs to backfill (spot work) or
// takes them back. The simulation runs no jobs (their instances are
// processes of the machine, driven on goroutines of the leader's, not
// steps), so no spot work runs on what is lent: the lending is a change
// of the block, acknowledged, durable and told by an event, as any.

// opLend turns the lending of a live block's GPUs on, or off again.
func (w *world) opLend() {
	id := w.pickLive(func(b core.Block) bool { return b.State == core.StateScheduled || b.State == core.StateActive })
	if id == "" {
		w.begin("lend: no block to lend")
		return
	}
	b0 := w.chk.stored[id]
	t := w.teamOf(b0.Team)
	caller, scope := w.caller(t)
	on := !b0.Lending
	w.begin("lend %s of %s (%s): lending %v", id, t.name, b0.State, on)
	b, err := w.g.SetLending(w.as(caller), scope, id, on)
	switch {
	case err == nil:
		w.count("lend/done")
		if b.ID != id || b.Lending != on {
			w.fail("block %s set lending %v answered block %s lending %v", id, on, b.ID, b.Lending)
		}
		w.m.learn(b)
	case injected(err):
		w.count("lend/fault")
		w.note("fault: %v", err)
		w.readBack(caller, scope, id)
	case errors.Is(err, core.ErrInvalidState):
		w.count("lend/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
	w.chk.touch(id)
}
