package simulate

import (
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// An operation is chosen by weight, then runs: it names itself (begin),
// calls the service as a client or the operator would, and records in
// the model what the service acknowledged. A refusal a client may meet
// is noted; an answer that no client should get fails the run.

type weightedOp struct {
	weight int
	run    func()
}

// randomOp runs one operation that the seed picks.
func (w *world) randomOp() {
	ops := []weightedOp{
		{22, w.opPurchase},
		{3, w.opStaleQuote},
		{4, w.opPurchaseAgain},
		{1, w.opTokenMismatch},
		{6, w.opRetryPending},
		{7, w.opCancel},
		{7, w.opExtend},
		{3, w.opTransfer},
		{2, w.opRelease},
		{3, w.opPlan},
		{1, w.opCancelPlan},
		{2, w.opApprove},
		{12, w.opLead},
		{12, w.opClock},
		{2, w.opNode},
		{1, w.opTeam},
		{1, w.opCrash},
		{1, w.opIsolation},
		{2, w.opSeries},
		{1, w.opCancelSeries},
		{3, w.opOrder},
		{1, w.opLend},
		{1, w.opUser},
		{1, w.opInventory},
		// Jobs and spot jobs (jobops.go).
		{3, w.opJob},
		{1, w.opSpotJob},
		{1, w.opStopJob},
		{3, w.opInstanceExit},
		{1, w.opJobIsolation},
		// The faults of faultleader.go, faultlatency.go and faultnodes.go.
		{1, w.opLeaderChange},
		{2, w.opSlowStore},
		{1, w.opEngineNode},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	n := w.rng.IntN(total)
	for _, o := range ops {
		if n < o.weight {
			o.run()
			break
		}
		n -= o.weight
	}
	w.end()
}

// opClock moves the simulated clock through the admin's use case:
// minutes mostly, hours often, a day sometimes. The service reconciles
// at once. The outbox's clock moves as far.
func (w *world) opClock() {
	var d time.Duration
	switch r := w.rng.IntN(20); {
	case r < 10:
		d = time.Duration(1+w.rng.IntN(20)) * time.Minute
	case r < 17:
		d = time.Duration(20+w.rng.IntN(160)) * time.Minute
	default:
		d = time.Duration(3+w.rng.IntN(22)) * time.Hour
	}
	before := w.now()
	w.begin("clock: advance %s", d)
	w.count("clock")
	if _, err := w.outbox.Advance(d); err != nil {
		w.must(err)
	}
	now, err := w.g.SetClock(w.as(w.admin), contract.ClockRequest{Advance: d})
	switch {
	case err == nil:
	case injected(err), errors.Is(err, core.ErrConflict):
		// The clock moved; the reconcile after it failed, or found the
		// index behind the store (which it rebuilds): the leader takes
		// the steps later.
		w.count("clock/reconcile-failed")
		w.note("the reconcile after it: %v", err)
	default:
		w.must(err)
	}
	if want := before.Add(d); !now.Equal(want) || !w.now().Equal(want) {
		w.fail("the clock moved from %s by %s to %s (answered %s)", before.Format(time.RFC3339), d, w.now().Format(time.RFC3339), now.Format(time.RFC3339))
	}
}

// opLead runs the leader's work once: reconcile, the outbox's due
// actions (after its clock moved up to two minutes, so that retries
// fall due), and convergence.
func (w *world) opLead() {
	d := time.Duration(1+w.rng.IntN(120)) * time.Second
	w.begin("lead: the outbox clock +%s", d)
	w.count("lead")
	if _, err := w.outbox.Advance(d); err != nil {
		w.must(err)
	}
	if err := w.svc.LeadOnce(w.ctx); err != nil {
		if !onlyInjected(err) {
			w.fail("the leader's work: %v", err)
		}
		w.count("lead/failed")
		w.note("met %v", err)
	}
}

// opCrash kills the service between two steps and starts it again.
func (w *world) opCrash() {
	w.begin("crash and restart")
	w.count("crash")
	w.crash()
}

// opNode fails a healthy node or recovers a failed one (the admin's
// use cases), retried later when the answer was a fault.
func (w *world) opNode() {
	n := w.fleet.Nodes[w.rng.IntN(len(w.fleet.Nodes))].Name
	if w.m.pendingNode(n) {
		w.begin("node %s: a change waits for its outcome", n)
		return
	}
	want := core.Unhealthy
	if h, ok := w.m.health[n]; ok && h == core.Unhealthy {
		want = core.Healthy
	}
	w.nodeChange(&pendingOp{kind: "node", node: n, health: want})
}

// nodeChange asks for a node's health change; on a fault it is pending.
func (w *world) nodeChange(p *pendingOp) {
	var (
		rep contract.NodeReport
		err error
	)
	if p.health == core.Unhealthy {
		w.begin("node %s: fail (try %d)", p.node, p.tries+1)
		rep, err = w.g.FailNode(w.as(w.admin), p.node, "simulated failure")
	} else {
		w.begin("node %s: recover (try %d)", p.node, p.tries+1)
		rep, err = w.g.RecoverNode(w.as(w.admin), p.node)
	}
	switch {
	case err == nil:
		w.count("node/" + string(p.health))
		w.note("replaced %v, degraded %v, recovered %v", rep.Replaced, rep.Degraded, rep.Recovered)
		if rep.Health != p.health {
			w.fail("node %s was asked to become %s; the report says %s", p.node, p.health, rep.Health)
		}
		w.m.health[p.node] = p.health
		w.m.resolve(p)
	case injected(err):
		w.count("node/fault")
		w.note("fault: %v", err)
		w.m.keep(p)
	default:
		w.must(err)
	}
}

// opTeam disables a team, one time in ten, or enables a disabled one
// again (the admin's use case, which no commit carries). Nothing is
// bought for a disabled team.
func (w *world) opTeam() {
	t := w.teams[w.rng.IntN(len(w.teams))]
	if !t.disabled && w.rng.IntN(10) != 0 {
		w.begin("team %s: left enabled", t.name)
		return
	}
	w.begin("team %s: disabled %v", t.name, !t.disabled)
	w.count("team")
	got, err := w.g.SetTeamDisabled(w.as(w.admin), t.id, !t.disabled)
	w.must(err)
	t.disabled = !t.disabled
	if got.DisabledAt.IsZero() == t.disabled {
		w.fail("team %s was set disabled %v; it answers disabled at %v", t.name, t.disabled, got.DisabledAt)
	}
}

// opApprove approves a block waiting for approval, as the admin.
func (w *world) opApprove() {
	id := w.pickLive(func(b core.Block) bool { return b.State == core.StatePaymentPending })
	if id == "" {
		w.begin("approve: nothing waits")
		return
	}
	w.begin("approve %s", id)
	b, err := w.g.ApproveBlock(w.as(w.admin), id)
	switch {
	case err == nil:
		w.count("approve")
		if b.State != core.StateScheduled {
			w.fail("block %s approved is %s", id, b.State)
		}
		w.m.acked(w.m.blocks[id], b)
	case injected(err):
		w.count("approve/fault")
		w.note("fault: %v", err) // the admin looks again later, as any block waiting
	case errors.Is(err, core.ErrInvalidState):
		w.count("approve/refused/" + reason(err))
		w.note("refused: %v", err)
	default:
		w.must(err)
	}
}

// opRetryPending retries the oldest operation whose outcome is not
// known yet.
func (w *world) opRetryPending() {
	if len(w.m.pending) == 0 {
		w.begin("retry: nothing pending")
		return
	}
	w.retry(w.m.pending[0])
}

// retry repeats a pending operation as its client would.
func (w *world) retry(p *pendingOp) {
	p.tries++
	switch p.kind {
	case "purchase":
		w.buy(p, true)
	case "plan":
		w.buyPlan(p)
	case "extend":
		w.extend(p)
	case "cancel":
		w.cancel(p)
	case "node":
		w.nodeChange(p)
	default:
		panic(fmt.Sprintf("pending operation of kind %q", p.kind))
	}
}

// keep makes p pending, if it is not already.
func (m *model) keep(p *pendingOp) {
	for _, q := range m.pending {
		if q == p {
			return
		}
	}
	m.pending = append(m.pending, p)
}

// resolve takes p off the pending operations: its outcome is known.
func (m *model) resolve(p *pendingOp) {
	for i, q := range m.pending {
		if q == p {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

// onlyInjected reports whether err is made of injected faults only
// (errors joined, each one injected), or of conflicts, which a
// reconcile meets when the index is behind the store (it rebuilds it),
// or of a lost lease.
func onlyInjected(err error) bool {
	return every(err, func(e error) bool { return injected(e) || errors.Is(e, core.ErrConflict) || leaseLost(e) })
}

// leaseLost reports whether err is the leader's lease lost on the wall
// clock: a machine so loaded that a pass outlived the lease (the next
// pass takes a new one).
func leaseLost(err error) bool { return errors.Is(err, store.ErrLeaseLost) }

// every reports whether ok holds for each error joined in err.
func every(err error, ok func(error) bool) bool {
	if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		for _, e := range j.Unwrap() {
			if !every(e, ok) {
				return false
			}
		}
		return true
	}
	return ok(err)
}

// pickLive is a live block that ok accepts, or "": a few draws among
// the live blocks.
func (w *world) pickLive(ok func(core.Block) bool) string {
	if len(w.m.live) == 0 {
		return ""
	}
	for range 8 {
		id := w.m.live[w.rng.IntN(len(w.m.live))]
		if b, read := w.chk.stored[id]; read && ok(b) {
			return id
		}
	}
	return ""
}

// pickTeam is a team to act for.
func (w *world) pickTeam() *simTeam { return w.teams[w.rng.IntN(len(w.teams))] }

// caller is who acts for team t: its member mostly, the admin one time
// in eight, and always while the team is disabled (its members cannot
// sign in then). scope is the team argument of a call on t's things.
func (w *world) caller(t *simTeam) (p core.Principal, scope string) {
	if t.disabled || w.rng.IntN(8) == 0 {
		return w.admin, ""
	}
	return t.member, t.id
}

func (w *world) teamOf(id string) *simTeam {
	for _, t := range w.teams {
		if t.id == id {
			return t
		}
	}
	return nil
}

// token is a new client token.
func (w *world) token() string {
	w.m.tokens++
	return fmt.Sprintf("tok-%d", w.m.tokens)
}

// reason names the refusal err is, for the report's counts.
func reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{core.ErrNoCapacity, "no-capacity"}, {core.ErrQuotaExceeded, "quota"}, {core.ErrBudgetExceeded, "budget"},
		{core.ErrOfferingExpired, "expired"}, {core.ErrOfferingUsed, "used"}, {core.ErrInvalidState, "invalid-state"},
		{core.ErrInvalidArgument, "invalid"}, {core.ErrIdempotencyMismatch, "mismatch"}, {core.ErrConflict, "conflict"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// opIsolation has a member reach for another team's block: reading,
// cancelling or extending it is answered not found, and the member's
// list of blocks holds its team's only (DESIGN.md, invariant 5).
func (w *world) opIsolation() {
	t := w.pickTeam()
	id := w.pickLive(func(b core.Block) bool { return b.Team != t.id })
	if id == "" {
		w.begin("isolation: no other team's block")
		return
	}
	w.begin("isolation: %s reaches for %s of %s", t.member.User.Name, id, w.teamName(w.chk.stored[id].Team))
	w.count("isolation")
	ctx := w.as(t.member)
	if _, err := w.g.GetBlock(ctx, t.id, id); !errors.Is(err, core.ErrNotFound) {
		w.fail("%s read %s of another team: %v; want not found", t.member.User.Name, id, err)
	}
	if _, err := w.g.CancelBlock(ctx, t.id, id); !errors.Is(err, core.ErrNotFound) {
		w.fail("%s cancelled %s of another team: %v; want not found", t.member.User.Name, id, err)
	}
	if _, err := w.g.ExtensionOfferings(ctx, t.id, id, time.Hour); !errors.Is(err, core.ErrNotFound) {
		w.fail("%s asked to extend %s of another team: %v; want not found", t.member.User.Name, id, err)
	}
	if _, err := w.g.GetBlock(ctx, w.chk.stored[id].Team, id); !errors.Is(err, core.ErrForbidden) {
		w.fail("%s read %s in another team's scope: %v; want forbidden", t.member.User.Name, id, err)
	}
	blocks, err := w.g.ListBlocks(ctx, t.id, core.StateScheduled)
	w.must(err)
	for _, b := range blocks {
		if b.Team != t.id {
			w.fail("%s's list of blocks holds %s of another team", t.member.User.Name, b.ID)
		}
	}
}
