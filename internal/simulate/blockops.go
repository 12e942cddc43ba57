package simulate

import (
	"errors"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Operations on a bought block: cancel, extend, hand on.

// opCancel cancels a live block (or releases it early once active).
func (w *world) opCancel() {
	id := w.pickLive(func(core.Block) bool { return true })
	if id == "" {
		w.begin("cancel: no live block")
		return
	}
	w.cancel(&pendingOp{kind: "cancel", block: id})
}

// cancel sends a cancellation (again, when retried) and records the
// answer. A retry of one whose answer was lost finds the block no
// longer live: the client then reads it.
func (w *world) cancel(p *pendingOp) {
	b0 := w.chk.stored[p.block]
	t := w.teamOf(b0.Team)
	caller, scope := w.caller(t)
	w.begin("cancel %s of %s, %s (try %d)", p.block, t.name, b0.State, p.tries+1)
	b, err := w.g.CancelBlock(w.as(caller), scope, p.block)
	switch {
	case err == nil:
		w.count("cancel/done")
		if b.State != core.StateCancelled {
			w.fail("block %s cancelled is %s", p.block, b.State)
		}
		r := w.m.learn(b)
		r.cancelled = true
		w.m.resolve(p)
	case injected(err):
		w.count("cancel/fault")
		w.note("fault: %v", err)
		w.m.keep(p)
	case errors.Is(err, core.ErrInvalidState):
		w.count("cancel/refused/" + reason(err))
		w.note("refused: %v", err)
		w.m.resolve(p)
		w.readBack(caller, scope, p.block)
	default:
		w.must(err)
	}
	w.chk.touch(p.block)
}

// readBack reads a block as its client would after an answer it could
// not trust, and takes that as acknowledged.
func (w *world) readBack(caller core.Principal, scope, id string) {
	b, err := w.g.GetBlock(w.as(caller), scope, id)
	w.must(err)
	w.note("reads it %s", b.State)
	w.m.learn(b)
}

// opExtend asks for an extension of a live block and buys it.
func (w *world) opExtend() {
	id := w.pickLive(func(b core.Block) bool { return b.State == core.StateScheduled || b.State == core.StateActive })
	if id == "" {
		w.begin("extend: no block to extend")
		return
	}
	b0 := w.chk.stored[id]
	t := w.teamOf(b0.Team)
	caller, scope := w.caller(t)
	d := time.Duration(1+w.rng.IntN(6)) * time.Hour
	w.begin("extend %s of %s (until %s) by %s", id, t.name, b0.End.Format(time.RFC3339), d)
	offs, err := w.g.ExtensionOfferings(w.as(caller), scope, id, d)
	switch {
	case errors.Is(err, core.ErrInvalidState), errors.Is(err, core.ErrInvalidArgument), errors.Is(err, core.ErrQuotaExceeded):
		w.count("extend/refused/" + reason(err))
		w.note("refused: %v", err)
		return
	case err != nil:
		w.must(err)
	case len(offs) == 0:
		w.count("extend/none")
		w.note("no offering")
		return
	}
	w.extend(&pendingOp{kind: "extend", block: id, quote: offs[0]})
}

// extend buys an extension offering (again, when retried: an offering
// extends once, and answers what it bought when bought again).
func (w *world) extend(p *pendingOp) {
	b0 := w.chk.stored[p.block]
	t := w.teamOf(b0.Team)
	caller, scope := w.caller(t)
	off := p.quote
	w.begin("extend %s of %s until %s for %d (try %d)", p.block, t.name, off.End.Format(time.RFC3339), off.Fee.Minor, p.tries+1)
	x, err := w.g.Extend(w.as(caller), scope, p.block, off.ID)
	switch {
	case err == nil:
		w.count("extend/done")
		if x.Block.ID != p.block || !x.End.Equal(off.End) || x.Fee != off.Fee {
			w.fail("extension of %s until %s for %d answered block %s until %s for %d", p.block, off.End.Format(time.RFC3339), off.Fee.Minor,
				x.Block.ID, x.End.Format(time.RFC3339), x.Fee.Minor)
		}
		// A retry may find the block changed since the extension it
		// answers (its hours handed on while the extension waited for
		// its outcome: the server died before it answered).
		if x.Block.End.Before(off.End) && p.tries == 0 {
			w.fail("block %s extended until %s ends at %s", p.block, off.End.Format(time.RFC3339), x.Block.End.Format(time.RFC3339))
		}
		w.m.learn(x.Block)
		w.m.resolve(p)
	case injected(err):
		w.count("extend/fault")
		w.note("fault: %v", err)
		w.m.keep(p)
	case errors.Is(err, core.ErrInvalidState), errors.Is(err, core.ErrNoCapacity), errors.Is(err, core.ErrQuotaExceeded),
		errors.Is(err, core.ErrBudgetExceeded), errors.Is(err, core.ErrOfferingExpired), errors.Is(err, core.ErrOfferingUsed):
		w.count("extend/refused/" + reason(err))
		w.note("refused: %v", err)
		w.m.resolve(p)
	default:
		w.must(err)
	}
	w.chk.touch(p.block)
}

// opTransfer gives a block's hours to another team, at a price one
// time in three.
func (w *world) opTransfer() {
	id := w.pickLive(func(b core.Block) bool { return b.PlanID == "" })
	if id == "" {
		w.begin("transfer: no block to hand on")
		return
	}
	b0 := w.chk.stored[id]
	t := w.teamOf(b0.Team)
	to := w.pickTeam()
	for to == t {
		to = w.pickTeam()
	}
	caller, scope := w.caller(t)
	price := core.Money{Currency: "USD"}
	if w.rng.IntN(3) == 0 {
		price.Minor = int64(100 * (1 + w.rng.IntN(500)))
	}
	w.begin("transfer %s of %s (%s) to %s for %d", id, t.name, b0.State, to.name, price.Minor)
	res, err := w.g.TransferBlock(w.as(caller), contract.TransferRequest{Scope: scope, BlockID: id, ToTeam: to.id, Price: price})
	switch {
	case err == nil:
		w.count("transfer/done")
		w.m.learn(res.Block)
		if res.Received == nil {
			w.fail("transfer of %s answered no received block", id)
		}
		w.note("received as %s", res.Received.ID)
		w.m.learn(*res.Received)
		w.chk.touch(res.Received.ID)
	case injected(err):
		// Not idempotent: the client reads the block to learn whether it
		// went (a retry would hand on what is left).
		w.count("transfer/fault")
		w.note("fault: %v", err)
		w.readBack(caller, scope, id)
	case errors.Is(err, core.ErrInvalidState), errors.Is(err, core.ErrQuotaExceeded), errors.Is(err, core.ErrBudgetExceeded),
		errors.Is(err, core.ErrInvalidArgument):
		w.count("transfer/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
	w.chk.touch(id)
}

// opRelease releases a block's hours for resale.
func (w *world) opRelease() {
	id := w.pickLive(func(b core.Block) bool { return b.PlanID == "" })
	if id == "" {
		w.begin("release: no block to hand on")
		return
	}
	b0 := w.chk.stored[id]
	t := w.teamOf(b0.Team)
	caller, scope := w.caller(t)
	w.begin("release %s of %s (%s)", id, t.name, b0.State)
	res, err := w.g.ReleaseBlock(w.as(caller), scope, id)
	switch {
	case err == nil:
		w.count("release/done")
		w.m.learn(res.Block)
	case injected(err):
		w.count("release/fault")
		w.note("fault: %v", err)
		w.readBack(caller, scope, id)
	case errors.Is(err, core.ErrInvalidState):
		w.count("release/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
	w.chk.touch(id)
}
