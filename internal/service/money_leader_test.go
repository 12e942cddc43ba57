package service

import (
	"fmt"
	"slices"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// The operations of the money property test that the leader's passes
// drive (money_property_test.go): the clock, with the reconciler, the
// standing orders, lending, preemptible jobs and their loop, and the
// approvals of blocks that wait for an admin.

// opClock moves the clock: minutes to hours mostly, days sometimes,
// and, when the month ends within three days, now and then to just
// before or after its turn. The reconciler runs with it (SimClock); then
// the leader's passes: the standing orders and the job loop.
func (e *moneyEnv) opClock() {
	now := e.now().UTC()
	turn := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	var d time.Duration
	switch n := e.rng.IntN(100); {
	case n < 70:
		d = time.Duration(5+e.rng.IntN(115)) * time.Minute
	case n < 95:
		d = time.Duration(2+e.rng.IntN(10)) * time.Hour
	case n < 98 || turn.Sub(now) > 72*time.Hour:
		d = time.Duration(24+e.rng.IntN(48)) * time.Hour
	default:
		d = max(turn.Sub(now)+time.Duration(e.rng.IntN(120)-60)*time.Minute, time.Minute)
	}
	e.op = fmt.Sprintf("clock +%s", d)
	if _, err := e.svc.SimClock().Advance(d); err != nil {
		e.fail("moving the clock: %v", err)
	}
	e.syncPending()
	e.serveOrders()
	e.svc.reconcileJobs(e.ctx)
	e.prune()
}

// prune drops from the lists what can no longer change.
func (e *moneyEnv) prune() {
	now := e.now()
	e.live = slices.DeleteFunc(e.live, func(b *modelBlock) bool { return b.cancelled || !b.end.After(now) })
	e.m.releases = slices.DeleteFunc(e.m.releases, func(r *modelRelease) bool { return !r.till.After(now) || r.resold >= r.gpuHours })
	if len(e.plans) > 50 {
		e.plans = e.plans[len(e.plans)-50:]
	}
	if len(e.series) > 50 {
		e.series = e.series[len(e.series)-50:]
	}
}

// syncPending records the blocks that waited for approval and failed
// payment: their fee reversed.
func (e *moneyEnv) syncPending() {
	for _, b := range e.live {
		if !b.pending {
			continue
		}
		got, err := e.st.GetBlock(e.ctx, b.id)
		if err != nil {
			e.fail("reading block %s: %v", b.id, err)
		}
		switch got.State {
		case core.StatePaymentFailed:
			e.m.paymentFailed(b)
		case core.StatePaymentPending:
		default:
			b.pending = false
		}
	}
}

// opOrder places a standing order, to buy within a maximum fee or to be
// told.
func (e *moneyEnv) opOrder() {
	team := e.team()
	typ, count := e.pickType()
	hours := e.hours()
	from, to := e.window(hours)
	from, to = from.Add(time.Hour), to.Add(time.Hour)
	mode, maxFee := core.OrderNotify, int64(0)
	if e.rng.IntN(4) > 0 {
		mode, maxFee = core.OrderBuy, 1+e.rng.Int64N(typ.OnDemand.Minor*int64(count*hours))
	}
	e.op = fmt.Sprintf("order for team %s: %s %d×%s %dh in [%s, %s), at most %d", e.names[team], mode, count, typ.Name, hours,
		from.Format(time.RFC3339), to.Format(time.RFC3339), maxFee)
	o, err := e.svc.CreateOrder(e.ctx, contract.OrderRequest{Team: team, Mode: mode, InstanceType: typ.Name, Count: count,
		Duration: time.Duration(hours) * time.Hour, StartAfter: from, EndBefore: to, MaxFee: core.Money{Minor: maxFee, Currency: "USD"}})
	if e.refused(err, core.ErrQuotaExceeded) {
		return
	}
	e.orders = append(e.orders, o)
}

func (e *moneyEnv) opCancelOrder() {
	if len(e.orders) == 0 {
		return
	}
	o := e.orders[e.rng.IntN(len(e.orders))]
	e.op = fmt.Sprintf("cancel order %s of team %s", o.ID, e.names[o.Team])
	e.noJournals = true
	_, err := e.svc.CancelOrder(e.ctx, o.Team, o.ID)
	e.refused(err, core.ErrInvalidState)
	e.syncOrders()
}

func (e *moneyEnv) opServeOrders() {
	e.op = "serve the standing orders"
	e.serveOrders()
}

// serveOrders runs the leader's pass over the standing orders and
// records the blocks they bought.
func (e *moneyEnv) serveOrders() {
	if err := e.svc.ServeOrders(e.ctx); err != nil {
		e.fail("serving the standing orders: %v", err)
	}
	e.syncOrders()
}

// syncOrders records the blocks the open orders bought, oldest order
// first (as they were served), and forgets the orders no longer open.
func (e *moneyEnv) syncOrders() {
	var open []core.Order
	var blocks []core.Block
	for _, o := range e.orders {
		got, err := e.svc.GetOrder(e.ctx, o.Team, o.ID)
		if err != nil {
			e.fail("reading order %s: %v", o.ID, err)
		}
		switch got.State {
		case core.OrderOpen:
			open = append(open, got)
		case core.OrderBought:
			b, err := e.st.GetBlock(e.ctx, got.BlockID)
			if err != nil {
				e.fail("reading block %s that order %s bought: %v", got.BlockID, o.ID, err)
			}
			if b.Fee.Minor > o.MaxFee.Minor || b.Team != o.Team {
				e.fail("order %s of team %s bought block %s of team %s at %d; its maximum is %d", o.ID, e.names[o.Team], b.ID, e.names[b.Team], b.Fee.Minor, o.MaxFee.Minor)
			}
			blocks = append(blocks, b)
		}
	}
	e.orders = open
	for _, b := range blocks {
		e.live = append(e.live, e.m.bought(b))
	}
	for _, r := range e.m.releases {
		if r.meets(blocks) {
			e.syncRelease(r)
		}
	}
}

// pickBegun is, three times in four, a block whose hours have begun
// (only those lend), else any block that may still be changed.
func (e *moneyEnv) pickBegun() *modelBlock {
	var begun []*modelBlock
	for _, c := range e.live {
		if !c.start.After(e.now()) && c.end.After(e.now()) && !c.cancelled {
			begun = append(begun, c)
		}
	}
	if len(begun) > 0 && e.rng.IntN(4) > 0 {
		return begun[e.rng.IntN(len(begun))]
	}
	return e.pickBlock()
}

// opLending turns a block's lending on or off, mostly on.
func (e *moneyEnv) opLending() {
	b := e.pickBegun()
	if b == nil {
		return
	}
	on := e.rng.IntN(4) > 0
	e.op = fmt.Sprintf("lending of block %s of team %s: %v", b.id, e.names[b.team], on)
	e.noJournals = true
	_, err := e.svc.SetLending(e.ctx, e.scope(b), b.id, on)
	e.refused(err, core.ErrInvalidState)
}

// opSpotJob submits a preemptible job; the job loop places it on free
// or lent GPUs and preempts it when a block needs them, and its run is
// charged when it ends. Past twenty jobs, the oldest is stopped: a job
// waits as long as no GPUs, or no budget, are there for it.
func (e *moneyEnv) opSpotJob() {
	team := e.team()
	typ, count := e.pickType()
	e.op = fmt.Sprintf("preemptible job of team %s: %d×%s", e.names[team], count, typ.Name)
	j, err := e.svc.CreateJob(e.ctx, team, contract.JobRequest{Preemptible: true, InstanceType: typ.Name, InstanceCount: count, Command: []string{"sweep"}})
	// Spot work is under the team's budget and quota like any purchase.
	if e.refused(err, core.ErrBudgetExceeded, core.ErrQuotaExceeded) {
		return
	}
	e.led.jobTeams[j.ID] = j.Team
	e.jobs = append(e.jobs, j)
	if len(e.jobs) > 20 {
		e.stopJob(0)
	}
}

// opStopJob stops a preemptible job: a run it had is charged.
func (e *moneyEnv) opStopJob() {
	e.op = "stop a job"
	if len(e.jobs) > 0 {
		e.stopJob(e.rng.IntN(len(e.jobs)))
	}
}

func (e *moneyEnv) stopJob(i int) {
	j := e.jobs[i]
	e.jobs = append(e.jobs[:i], e.jobs[i+1:]...)
	e.op += fmt.Sprintf("; stop job %s of team %s", j.ID, e.names[j.Team])
	_, err := e.svc.StopJob(e.ctx, j.Team, j.ID)
	e.refused(err, core.ErrInvalidState)
}

// opHolderJob submits a job of a block's holder on the block: on a
// lending block, the backfill there is preempted.
func (e *moneyEnv) opHolderJob() {
	b := e.pickBegun()
	if b == nil {
		return
	}
	e.op = fmt.Sprintf("job of team %s on block %s", e.names[b.team], b.id)
	e.noJournals = true
	_, err := e.svc.CreateJob(e.ctx, b.team, contract.JobRequest{BlockID: b.id, InstanceCount: 1, Command: []string{"train"}})
	e.refused(err, core.ErrInvalidState)
}

func (e *moneyEnv) opJobLoop() {
	e.op = "a pass of the job loop"
	e.svc.reconcileJobs(e.ctx)
}

// opApprove approves a block that waits for an admin.
func (e *moneyEnv) opApprove() {
	for _, b := range e.live {
		if !b.pending {
			continue
		}
		e.op = fmt.Sprintf("approve block %s of team %s", b.id, e.names[b.team])
		e.noJournals = true
		_, err := e.svc.ApproveBlock(e.ctx, b.id)
		if !e.refused(err, core.ErrInvalidState) {
			b.pending = false
		}
		return
	}
}
