package simulate

import (
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Purchases: searched, bought under a client token, retried with it.

// pickType is an instance type and a count of it; more than three
// instances wait for an admin's approval.
func (w *world) pickType() (string, int) {
	switch w.rng.IntN(3) {
	case 0:
		return "h100.8x", 1 + w.rng.IntN(2)
	case 1:
		return "h100.2x", 1 + w.rng.IntN(4)
	}
	return "l4.1x", 1 + w.rng.IntN(5)
}

// hours is a block's length: up to eight hours mostly, up to two days
// sometimes.
func (w *world) hours() int {
	if w.rng.IntN(6) == 0 {
		return 9 + w.rng.IntN(40)
	}
	return 1 + w.rng.IntN(8)
}

// window is a search window: starting up to a day and a half ahead,
// with up to a day of slack.
func (w *world) window(hours int) (time.Time, time.Time) {
	from := w.now().Add(time.Duration(w.rng.IntN(36*60)) * time.Minute)
	return from, from.Add(time.Duration(hours+w.rng.IntN(25)) * time.Hour)
}

// opPurchase searches offerings for a team and buys one of them.
func (w *world) opPurchase() {
	t := w.pickTeam()
	p, _ := w.caller(t)
	typ, count := w.pickType()
	hours := w.hours()
	from, to := w.window(hours)
	w.begin("purchase: %s for %s searches %d×%s for %dh in [%s, %s)", p.User.Name, t.name, count, typ, hours,
		from.Format(time.RFC3339), to.Format(time.RFC3339))
	offs, err := w.g.Offerings(w.as(p), core.SearchRequest{Types: []string{typ}, Count: count, Duration: time.Duration(hours) * time.Hour,
		StartAfter: from, EndBefore: to, Team: t.id})
	if errors.Is(err, core.ErrQuotaExceeded) {
		w.count("purchase/quota")
		w.note("refused: %v", err)
		return
	}
	w.must(err)
	if len(offs) == 0 {
		w.count("purchase/none")
		w.note("no offering")
		return
	}
	off := offs[w.rng.IntN(len(offs))]
	w.m.addQuote(off)
	w.buy(&pendingOp{kind: "purchase", quote: off,
		buy: contract.PurchaseRequest{Team: t.id, OfferingID: off.ID, ClientToken: w.token(), Name: fmt.Sprintf("b%d", w.m.tokens)}}, false)
}

// opStaleQuote buys an offering found earlier, for any team: it may
// have expired, or been bought, or its capacity taken since.
func (w *world) opStaleQuote() {
	if len(w.m.quotes) == 0 {
		w.begin("stale quote: none kept")
		return
	}
	off := w.m.quotes[w.rng.IntN(len(w.m.quotes))]
	t := w.pickTeam()
	w.buy(&pendingOp{kind: "purchase", quote: off,
		buy: contract.PurchaseRequest{Team: t.id, OfferingID: off.ID, ClientToken: w.token(), Name: fmt.Sprintf("b%d", w.m.tokens)}}, false)
}

// buy sends a purchase (again, when retried) and records the answer.
func (w *world) buy(p *pendingOp, retried bool) {
	t := w.teamOf(p.buy.Team)
	caller, _ := w.caller(t)
	off := p.quote
	w.begin("buy %d×%s [%s, %s) fee %d for %s, token %s (try %d)", off.Count, off.InstanceType, off.Start.Format(time.RFC3339),
		off.End.Format(time.RFC3339), off.Fee.Minor, t.name, p.buy.ClientToken, p.tries+1)
	b, created, err := w.g.Purchase(w.as(caller), p.buy)
	switch {
	case err == nil:
		w.count("purchase/bought")
		w.note("bought %s (created %v)", b.ID, created)
		if !created && !retried {
			w.count("purchase/healed") // the service found its own lost answer
		}
		w.checkBought(b, p, created)
		w.m.learn(b)
		w.m.bought = append(w.m.bought, &purchase{req: p.buy, block: b.ID})
		w.m.resolve(p)
	case injected(err):
		w.count("purchase/fault")
		w.note("fault: %v", err)
		w.m.keep(p)
	case errors.Is(err, core.ErrNoCapacity), errors.Is(err, core.ErrQuotaExceeded), errors.Is(err, core.ErrBudgetExceeded),
		errors.Is(err, core.ErrOfferingExpired), errors.Is(err, core.ErrOfferingUsed), errors.Is(err, core.ErrInvalidState):
		w.count("purchase/refused/" + reason(err))
		w.note("refused: %v", err)
		w.m.resolve(p)
		// A refused purchase left nothing: no block under its token.
		if _, err := w.st.Idempotency(w.ctx, p.buy.Team, p.buy.ClientToken); !errors.Is(err, store.ErrNotFound) {
			w.fail("purchase under token %s was refused, yet the token is stored (err %v)", p.buy.ClientToken, err)
		}
	default:
		w.must(err)
	}
}

// checkBought checks a block a purchase answered with against its quote
// (price honesty) and, once the step is read, against its charge.
// created is false when the answer is a block bought before.
func (w *world) checkBought(b core.Block, p *pendingOp, created bool) {
	off := p.quote
	// A retry may find the block changed since it was bought, by an
	// operation on it while the purchase waited for its outcome (the
	// server died before it answered): extended, or its hours handed on.
	changed := b.Version > 1
	if b.Team != p.buy.Team || b.InstanceType != off.InstanceType || b.Count != off.Count || b.Zone != off.Zone ||
		!b.Start.Equal(off.Start) || (!b.End.Equal(off.End) && !changed) {
		w.fail("block %s is %s's %d×%s in %s over [%s, %s); the quote was %d×%s in %s over [%s, %s) for %s",
			b.ID, w.teamName(b.Team), b.Count, b.InstanceType, b.Zone, b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339),
			off.Count, off.InstanceType, off.Zone, off.Start.Format(time.RFC3339), off.End.Format(time.RFC3339), w.teamName(p.buy.Team))
	}
	if b.Fee != off.Fee && !(changed && b.Fee.Currency == off.Fee.Currency && b.Fee.Minor >= off.Fee.Minor) {
		w.fail("block %s was bought for %d %s; the quote said %d %s", b.ID, b.Fee.Minor, b.Fee.Currency, off.Fee.Minor, off.Fee.Currency)
	}
	for _, pl := range b.Placements {
		if created && w.m.health[pl.Node] == core.Unhealthy && !w.m.pendingNode(pl.Node) {
			w.fail("block %s was placed on node %s, which failed and has not recovered", b.ID, pl.Node)
		}
	}
	w.chk.touch(b.ID)
	w.expectCharged(b.ID, off.Fee.Minor)
}

// expectCharged checks, once the step is read, that block id,
// acknowledged bought for fee, was charged by one purchase journal and
// is stored with that fee or more (an extension adds to it).
func (w *world) expectCharged(id string, fee int64) {
	w.chk.expect = append(w.chk.expect, func() {
		if n := w.chk.led.purchases[id]; n != 1 {
			w.fail("block %s, acknowledged bought, was charged by %d purchase journals", id, n)
		}
		if got := w.chk.stored[id].Fee.Minor; got < fee {
			w.fail("block %s, bought for %d, is stored with a fee of %d", id, fee, got)
		}
	})
}

// opPurchaseAgain repeats an acknowledged purchase with its client
// token: the same block (or plan), and no second charge.
func (w *world) opPurchaseAgain() {
	if len(w.m.plans) > 0 && w.rng.IntN(4) == 0 {
		w.planAgain(w.m.plans[w.rng.IntN(len(w.m.plans))])
		return
	}
	if len(w.m.bought) == 0 {
		w.begin("purchase again: nothing bought yet")
		return
	}
	pu := w.m.bought[w.rng.IntN(len(w.m.bought))]
	t := w.teamOf(pu.req.Team)
	caller, _ := w.caller(t)
	w.begin("purchase again under token %s (block %s)", pu.req.ClientToken, pu.block)
	charged := w.chk.led.purchases[pu.block]
	b, created, err := w.g.Purchase(w.as(caller), pu.req)
	switch {
	case err == nil:
		w.count("again/same")
		if created || b.ID != pu.block {
			w.fail("purchase under token %s again answered block %s (created %v); it bought %s", pu.req.ClientToken, b.ID, created, pu.block)
		}
		w.chk.expect = append(w.chk.expect, func() {
			if n := w.chk.led.purchases[pu.block]; n != charged {
				w.fail("purchase under token %s again: block %s has %d purchase journals, %d before", pu.req.ClientToken, pu.block, n, charged)
			}
		})
	case injected(err):
		w.count("again/fault")
		w.note("fault: %v", err)
	default:
		w.must(err)
	}
}

// planAgain repeats an acknowledged plan purchase with its client token.
func (w *world) planAgain(pl *planRec) {
	t := w.teamOf(pl.team)
	caller, _ := w.caller(t)
	w.begin("plan purchase again under token %s (plan %s)", pl.req.ClientToken, pl.id)
	charged := map[string]int{}
	for _, id := range pl.segments {
		charged[id] = w.chk.led.purchases[id]
	}
	v, created, err := w.g.PurchasePlan(w.as(caller), pl.req)
	switch {
	case err == nil:
		w.count("again/plan")
		if created || v.Plan.ID != pl.id {
			w.fail("plan purchase under token %s again answered plan %s (created %v); it bought %s", pl.req.ClientToken, v.Plan.ID, created, pl.id)
		}
		w.chk.expect = append(w.chk.expect, func() {
			for id, n := range charged {
				if got := w.chk.led.purchases[id]; got != n {
					w.fail("plan purchase under token %s again: segment %s has %d purchase journals, %d before", pl.req.ClientToken, id, got, n)
				}
			}
		})
	case injected(err):
		w.count("again/fault")
		w.note("fault: %v", err)
	default:
		w.must(err)
	}
}

// opTokenMismatch reuses an acknowledged purchase's client token with
// another name: refused, and nothing bought.
func (w *world) opTokenMismatch() {
	if len(w.m.bought) == 0 {
		w.begin("token mismatch: nothing bought yet")
		return
	}
	pu := w.m.bought[w.rng.IntN(len(w.m.bought))]
	req := pu.req
	req.Name += "-other"
	t := w.teamOf(req.Team)
	caller, _ := w.caller(t)
	w.begin("token %s reused with another name", req.ClientToken)
	_, _, err := w.g.Purchase(w.as(caller), req)
	switch {
	case errors.Is(err, core.ErrIdempotencyMismatch):
		w.count("mismatch/refused/" + reason(err))
	case injected(err):
		// The server died before it looked the token up.
		w.count("mismatch/fault")
		w.note("fault: %v", err)
	default:
		w.fail("token %s reused with other parameters answered %v; want an idempotency mismatch", req.ClientToken, err)
	}
}

// opPlan searches plan offerings of up to two segments and buys one.
func (w *world) opPlan() {
	t := w.pickTeam()
	p, _ := w.caller(t)
	typ, count := w.pickType()
	hours := 2 + w.rng.IntN(12)
	from, to := w.window(hours)
	to = to.Add(24 * time.Hour)
	w.begin("plan: %s for %s searches %d×%s for %dh in [%s, %s)", p.User.Name, t.name, count, typ, hours,
		from.Format(time.RFC3339), to.Format(time.RFC3339))
	offs, err := w.g.PlanOfferings(w.as(p), core.PlanSearchRequest{Type: typ, Count: count, Duration: time.Duration(hours) * time.Hour,
		StartAfter: from, EndBefore: to, Target: "training-job", MaxSegments: 2, Team: t.id})
	if errors.Is(err, core.ErrQuotaExceeded) {
		w.count("plan/quota")
		w.note("refused: %v", err)
		return
	}
	w.must(err)
	if len(offs) == 0 {
		w.count("plan/none")
		w.note("no offering")
		return
	}
	off := offs[w.rng.IntN(len(offs))]
	w.buyPlan(&pendingOp{kind: "plan", pquote: off,
		plan: contract.PlanPurchaseRequest{Team: t.id, OfferingID: off.ID, ClientToken: w.token(), Name: fmt.Sprintf("p%d", w.m.tokens)}})
}

// buyPlan sends a plan purchase (again, when retried) and records the
// answer.
func (w *world) buyPlan(p *pendingOp) {
	t := w.teamOf(p.plan.Team)
	caller, _ := w.caller(t)
	off := p.pquote
	w.begin("buy plan of %d segments of %d×%s for %s, token %s (try %d)", len(off.Segments), off.Count, off.InstanceType, t.name,
		p.plan.ClientToken, p.tries+1)
	v, _, err := w.g.PurchasePlan(w.as(caller), p.plan)
	switch {
	case err == nil:
		w.count("plan/bought")
		w.note("bought %s", v.Plan.ID)
		if len(v.Plan.Segments) != len(off.Segments) {
			w.fail("plan %s has %d segments; its quote had %d", v.Plan.ID, len(v.Plan.Segments), len(off.Segments))
		}
		rec := &planRec{id: v.Plan.ID, team: t.id, req: p.plan}
		var sum int64
		for i, b := range v.Plan.Segments {
			sg := off.Segments[i]
			changed := b.Version > 1 // extended or handed on while the purchase waited for its outcome (see checkBought)
			if (b.Fee != sg.Fee || !b.End.Equal(sg.End)) && !changed || !b.Start.Equal(sg.Start) || b.Count != off.Count || b.InstanceType != off.InstanceType {
				w.fail("segment %s of plan %s is %d×%s over [%s, %s) for %d; quoted %d×%s over [%s, %s) for %d", b.ID, v.Plan.ID,
					b.Count, b.InstanceType, b.Start.Format(time.RFC3339), b.End.Format(time.RFC3339), b.Fee.Minor,
					off.Count, off.InstanceType, sg.Start.Format(time.RFC3339), sg.End.Format(time.RFC3339), sg.Fee.Minor)
			}
			sum += sg.Fee.Minor
			rec.segments = append(rec.segments, b.ID)
			w.m.learn(b)
			w.chk.touch(b.ID)
		}
		if v.Plan.Fee.Minor != sum {
			w.fail("plan %s costs %d; its segments were quoted %d together", v.Plan.ID, v.Plan.Fee.Minor, sum)
		}
		w.m.plans = append(w.m.plans, rec)
		w.m.resolve(p)
	case injected(err):
		w.count("plan/fault")
		w.note("fault: %v", err)
		w.m.keep(p)
	case errors.Is(err, core.ErrNoCapacity), errors.Is(err, core.ErrQuotaExceeded), errors.Is(err, core.ErrBudgetExceeded),
		errors.Is(err, core.ErrOfferingExpired), errors.Is(err, core.ErrOfferingUsed), errors.Is(err, core.ErrInvalidState):
		w.count("plan/refused/" + reason(err))
		w.note("refused: %v", err)
		w.m.resolve(p)
		if _, err := w.st.Idempotency(w.ctx, p.plan.Team, p.plan.ClientToken); !errors.Is(err, store.ErrNotFound) {
			w.fail("plan purchase under token %s was refused, yet the token is stored (err %v)", p.plan.ClientToken, err)
		}
	default:
		w.must(err)
	}
}

// opCancelPlan cancels a plan: every segment to come or active.
func (w *world) opCancelPlan() {
	var pl *planRec
	for range 4 {
		if len(w.m.plans) == 0 {
			break
		}
		p := w.m.plans[w.rng.IntN(len(w.m.plans))]
		if w.planLive(p) {
			pl = p
			break
		}
	}
	if pl == nil {
		w.begin("cancel plan: none live")
		return
	}
	t := w.teamOf(pl.team)
	caller, scope := w.caller(t)
	w.begin("cancel plan %s of %s", pl.id, t.name)
	v, err := w.g.CancelPlan(w.as(caller), scope, pl.id)
	switch {
	case err == nil:
		w.count("cancelplan/done")
		for _, b := range v.Plan.Segments {
			if b.State.Live() {
				w.fail("plan %s cancelled, yet its segment %s is %s", pl.id, b.ID, b.State)
			}
			w.m.learn(b)
			w.chk.touch(b.ID)
		}
	case injected(err):
		// The client reads the plan again: each segment is as stored,
		// which the checker reads.
		w.count("cancelplan/fault")
		w.note("fault: %v", err)
	case errors.Is(err, core.ErrInvalidState):
		w.count("cancelplan/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
}

// planLive reports whether a segment of plan p is live, as last read.
func (w *world) planLive(p *planRec) bool {
	for _, id := range p.segments {
		if w.chk.stored[id].State.Live() {
			return true
		}
	}
	return false
}
