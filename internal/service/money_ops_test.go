package service

import (
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// The operations of the money property test (money_property_test.go).
// Each names itself in e.op before it calls the service, records what
// the service answered in the model, and leaves the journals to check.

// gpusPer is the GPUs of one instance of typ.
func gpusPer(typ string) int {
	for _, t := range moneyTypes {
		if t.Name == typ {
			return t.GPUsPerInstance
		}
	}
	return 0
}

// bought records blocks just bought and checks which releases they
// resold: exactly the released GPU-hours they overlap. Only releases
// whose hours meet theirs are read: a journal that moved another's
// escrow would differ from the model anyway.
func (e *moneyEnv) bought(blocks []core.Block) {
	want := make([]int64, len(e.m.releases))
	for i, r := range e.m.releases {
		want[i] = r.overlap(blocks)
	}
	for _, b := range blocks {
		e.live = append(e.live, e.m.bought(b))
	}
	for i, r := range e.m.releases {
		if !r.meets(blocks) {
			continue
		}
		before := r.resold
		e.syncRelease(r)
		if got := r.resold - before; got != want[i] {
			e.fail("release %s of block %s: the purchase resold %d GPU-hours of it; its blocks overlap %d left unsold", r.id, r.holder.id, got, want[i])
		}
	}
}

// syncRelease reads how much of r was resold and records the shares of
// the holder's escrow that left with it.
func (e *moneyEnv) syncRelease(r *modelRelease) {
	hs, err := e.st.HandoversOf(e.ctx, r.holder.id)
	if err != nil {
		e.fail("reading the hand-overs of block %s: %v", r.holder.id, err)
	}
	for _, h := range hs {
		if h.ID != r.id {
			continue
		}
		if h.ResoldGPUHours < r.resold || h.ResoldGPUHours > r.gpuHours {
			e.fail("release %s: resold %d GPU-hours, after %d, of %d released", r.id, h.ResoldGPUHours, r.resold, r.gpuHours)
		}
		if h.ResoldGPUHours > r.resold {
			e.m.resold(r, h.ResoldGPUHours)
		}
		return
	}
	e.fail("release %s of block %s is not stored", r.id, r.holder.id)
}

// window is a search window: from 30 minutes to three days ahead, long
// enough for hours and some slack.
func (e *moneyEnv) window(hours int) (time.Time, time.Time) {
	from := e.now().Add(time.Duration(30+e.rng.IntN(72*60)) * time.Minute)
	return from, from.Add(time.Duration(hours+e.rng.IntN(24)) * time.Hour)
}

// hours is a block's length: up to 12 hours mostly, up to 3 days
// sometimes.
func (e *moneyEnv) hours() int {
	if e.rng.IntN(5) == 0 {
		return 12 + e.rng.IntN(60)
	}
	return 1 + e.rng.IntN(12)
}

// opPurchase buys one of the offerings a search returns.
func (e *moneyEnv) opPurchase() {
	team := e.team()
	typ, count := e.pickType()
	hours := e.hours()
	from, to := e.window(hours)
	e.op = fmt.Sprintf("purchase team %s %d×%s %dh in [%s, %s)", e.names[team], count, typ.Name, hours, from.Format(time.RFC3339), to.Format(time.RFC3339))
	offs, err := e.svc.Offerings(e.ctx, core.SearchRequest{Types: []string{typ.Name}, Count: count, Duration: time.Duration(hours) * time.Hour,
		StartAfter: from, EndBefore: to, Team: team})
	if e.refused(err, core.ErrQuotaExceeded) || len(offs) == 0 {
		return
	}
	off := offs[e.rng.IntN(len(offs))]
	req := contract.PurchaseRequest{Team: team, OfferingID: off.ID, ClientToken: e.token()}
	e.op += fmt.Sprintf(": offering of %s at %s, fee %d", off.End.Sub(off.Start), off.Start.Format(time.RFC3339), off.Fee.Minor)
	b, _, err := e.svc.Purchase(e.ctx, req)
	if e.refused(err, core.ErrBudgetExceeded, core.ErrQuotaExceeded, core.ErrNoCapacity) {
		return
	}
	if b.Fee != off.Fee || b.Team != team {
		e.fail("bought block %s for team %s at %d; the offering was for %d", b.ID, b.Team, b.Fee.Minor, off.Fee.Minor)
	}
	e.lastBuy = &req
	e.bought([]core.Block{b})
}

// opPurchaseAgain repeats the last purchase with its client token: the
// same block, and no second charge.
func (e *moneyEnv) opPurchaseAgain() {
	if e.lastBuy == nil {
		return
	}
	e.op = fmt.Sprintf("purchase again, token %s", e.lastBuy.ClientToken)
	e.noJournals = true
	b, created, err := e.svc.Purchase(e.ctx, *e.lastBuy)
	if err != nil || created || !e.m.isBlock(b.ID) {
		e.fail("the purchase again: block %s, created %v, %v; want the block bought first", b.ID, created, err)
	}
}

// opExtend extends a block by the offering it is quoted, now and then
// buying that offering twice (the second charges nothing).
func (e *moneyEnv) opExtend() {
	b := e.pickBlock()
	if b == nil {
		return
	}
	d := time.Duration(1+e.rng.IntN(8)) * time.Hour
	scope := e.scope(b)
	e.op = fmt.Sprintf("extend block %s of team %s by %s", b.id, e.names[b.team], d)
	offs, err := e.svc.ExtensionOfferings(e.ctx, scope, b.id, d)
	if e.refused(err, core.ErrInvalidState, core.ErrInvalidArgument) || len(offs) == 0 {
		return
	}
	off := offs[0]
	x, err := e.svc.Extend(e.ctx, scope, b.id, off.ID)
	if e.refused(err, core.ErrInvalidState, core.ErrInvalidArgument, core.ErrBudgetExceeded, core.ErrQuotaExceeded, core.ErrNoCapacity) {
		return
	}
	e.m.extended(b, x.End, off.Fee.Minor)
	if x.Fee != off.Fee || x.Block.Fee.Minor != b.fee || !x.Block.End.Equal(off.End) {
		e.fail("extension of block %s: fee %d, block's fee %d until %s; want %d, %d until %s", b.id, x.Fee.Minor, x.Block.Fee.Minor,
			x.Block.End.Format(time.RFC3339), off.Fee.Minor, b.fee, off.End.Format(time.RFC3339))
	}
	if e.rng.IntN(4) == 0 {
		e.check() // the extension's journal
		e.op += ", then the same offering again"
		e.noJournals = true
		again, err := e.svc.Extend(e.ctx, scope, b.id, off.ID)
		if err != nil || !again.End.Equal(x.End) {
			e.fail("the same extension again: %+v, %v; want the extension bought", again, err)
		}
	}
}

// opCancel cancels a block, the refund under the policy of what its team
// paid for its hours.
func (e *moneyEnv) opCancel() {
	b := e.pickBlock()
	if b == nil {
		return
	}
	e.op = fmt.Sprintf("cancel block %s of team %s (fee %d, paid %d, escrow %d)", b.id, e.names[b.team], b.fee, b.paid, b.escrow)
	got, err := e.svc.CancelBlock(e.ctx, e.scope(b), b.id)
	if e.refused(err, core.ErrInvalidState) {
		return
	}
	if got.State != core.StateCancelled {
		e.fail("cancelled block %s is %s", b.id, got.State)
	}
	e.m.cancelledAt(b, e.now(), e.limits)
}

// opTransfer hands a block's hours on to another team, for free or at a
// price, as its team or as an admin, as the policy allows.
func (e *moneyEnv) opTransfer() {
	b := e.pickBlock()
	if b == nil {
		return
	}
	to := e.otherTeam(b.team)
	var price int64
	if e.rng.IntN(2) == 0 {
		price = e.rng.Int64N(b.fee*3/2 + 2)
	}
	scope := e.scope(b)
	if e.limits.Transfers == core.TransfersAdmin && e.rng.IntN(5) > 0 {
		scope = ""
	}
	e.op = fmt.Sprintf("transfer block %s of team %s (fee %d, escrow %d) to team %s at %d, scope %q", b.id, e.names[b.team], b.fee, b.escrow,
		e.names[to], price, e.names[scope])
	res, err := e.svc.TransferBlock(e.ctx, contract.TransferRequest{Scope: scope, BlockID: b.id, ToTeam: to, Price: core.Money{Minor: price, Currency: "USD"}})
	if e.refused(err, core.ErrInvalidState, core.ErrQuotaExceeded, core.ErrBudgetExceeded, core.ErrForbidden) {
		return
	}
	if res.Received == nil || res.Block.Fee.Minor != b.fee {
		e.fail("transfer of block %s: received %v, holder's fee %d; want a block received, the holder's fee %d", b.id, res.Received, res.Block.Fee.Minor, b.fee)
	}
	recv := *res.Received
	share := e.m.transferred(b, res.Block, recv, price)
	if recv.Fee.Minor != share || recv.Team != to || !recv.End.Equal(res.Handover.Until) {
		e.fail("transfer of block %s: received block %s of team %s at %d until %s; want team %s's at %d, the share of the fee",
			b.id, recv.ID, recv.Team, recv.Fee.Minor, recv.End.Format(time.RFC3339), e.names[to], share)
	}
	e.live = append(e.live, e.m.blocks[recv.ID])
}

// opRelease releases a block's hours for resale.
func (e *moneyEnv) opRelease() {
	b := e.pickBlock()
	if b == nil {
		return
	}
	e.op = fmt.Sprintf("release block %s of team %s (fee %d, escrow %d)", b.id, e.names[b.team], b.fee, b.escrow)
	res, err := e.svc.ReleaseBlock(e.ctx, e.scope(b), b.id)
	if e.refused(err, core.ErrInvalidState) {
		return
	}
	ho := res.Handover
	if ho.GPUHours != b.gpus*int64(ho.Until.Sub(ho.From)/time.Hour) || !ho.Until.Equal(b.end) {
		e.fail("release of block %s: %d GPU-hours from %s until %s; the block holds %d GPUs until %s", b.id, ho.GPUHours,
			ho.From.Format(time.RFC3339), ho.Until.Format(time.RFC3339), b.gpus, b.end.Format(time.RFC3339))
	}
	e.m.released(b, res.Block, ho)
}

// opPlan buys a training plan of up to three segments.
func (e *moneyEnv) opPlan() {
	team := e.team()
	typ, count := e.pickType()
	hours := 2 + e.rng.IntN(20)
	from, to := e.window(hours)
	to = to.Add(24 * time.Hour)
	e.op = fmt.Sprintf("plan for team %s, %d×%s %dh in [%s, %s)", e.names[team], count, typ.Name, hours, from.Format(time.RFC3339), to.Format(time.RFC3339))
	offs, err := e.svc.PlanOfferings(e.ctx, core.PlanSearchRequest{Type: typ.Name, Count: count, Duration: time.Duration(hours) * time.Hour,
		StartAfter: from, EndBefore: to, Target: core.TargetTrainingJob, MaxSegments: 1 + e.rng.IntN(3), Team: team})
	if e.refused(err, core.ErrQuotaExceeded) || len(offs) == 0 {
		return
	}
	off := offs[e.rng.IntN(len(offs))]
	e.op += fmt.Sprintf(": %d segments, fee %d", len(off.Segments), off.Fee().Minor)
	v, _, err := e.svc.PurchasePlan(e.ctx, contract.PlanPurchaseRequest{Team: team, OfferingID: off.ID, ClientToken: e.token()})
	if e.refused(err, core.ErrBudgetExceeded, core.ErrQuotaExceeded, core.ErrNoCapacity) {
		return
	}
	var sum int64
	for _, s := range v.Plan.Segments {
		sum += s.Fee.Minor
	}
	if sum != off.Fee().Minor {
		e.fail("plan %s: segments charged %d; the offering was for %d", v.Plan.ID, sum, off.Fee().Minor)
	}
	e.bought(v.Plan.Segments)
	e.plans = append(e.plans, moneyGroup{v.Plan.ID, team})
}

// opCancelPlan cancels what is left of a plan.
func (e *moneyEnv) opCancelPlan() {
	if len(e.plans) == 0 {
		return
	}
	p := e.plans[e.rng.IntN(len(e.plans))]
	e.op = fmt.Sprintf("cancel plan %s of team %s", p.id, e.names[p.team])
	v, err := e.svc.CancelPlan(e.ctx, p.team, p.id)
	if e.refused(err, core.ErrInvalidState) {
		return
	}
	e.cancelledNow(v.Plan.Segments)
}

// cancelledNow records the blocks that a cancellation of a plan or a
// series cancelled, as they are now.
func (e *moneyEnv) cancelledNow(blocks []core.Block) {
	for _, s := range blocks {
		b := e.m.blocks[s.ID]
		if b == nil {
			e.fail("block %s, which no operation made", s.ID)
		}
		if s.State == core.StateCancelled && !b.cancelled {
			e.m.cancelledAt(b, e.now(), e.limits)
		}
	}
}

// opSeries buys a recurring window: a few hours on some days for a week
// or two, in UTC or Madrid's time.
func (e *moneyEnv) opSeries() {
	team := e.team()
	typ, count := e.pickType()
	days := [][]string{{"weekdays"}, {"mon", "wed", "fri"}, {"tue"}, {"sat", "sun"}}[e.rng.IntN(4)]
	start := 6 + e.rng.IntN(10)
	tz := []string{"UTC", "Europe/Madrid"}[e.rng.IntN(2)]
	req := contract.SeriesSearchRequest{Team: team, InstanceType: typ.Name, Count: count, Days: days,
		StartTime: fmt.Sprintf("%02d:00", start), EndTime: fmt.Sprintf("%02d:00", start+1+e.rng.IntN(6)), TimeZone: tz,
		FromDate: e.now().Add(time.Duration(24+e.rng.IntN(48)) * time.Hour).Format(time.DateOnly), Weeks: 1 + e.rng.IntN(2),
		Partial: e.rng.IntN(2) == 0}
	e.op = fmt.Sprintf("series for team %s: %+v", e.names[team], req)
	offs, err := e.svc.SeriesOfferings(e.ctx, req)
	if e.refused(err, core.ErrQuotaExceeded) {
		return
	}
	var ids []string
	for _, o := range offs {
		if o.ID != "" {
			ids = append(ids, o.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	v, _, err := e.svc.PurchaseSeries(e.ctx, contract.SeriesPurchaseRequest{Team: team, OfferingID: ids[e.rng.IntN(len(ids))], ClientToken: e.token()})
	if e.refused(err, core.ErrBudgetExceeded, core.ErrQuotaExceeded, core.ErrNoCapacity) {
		return
	}
	e.bought(v.Series.Occurrences)
	e.series = append(e.series, moneyGroup{v.Series.ID, team})
}

// opCancelSeries cancels what is left of a series, occurrence by
// occurrence; one handed on stops it there, and what it cancelled
// before stays cancelled.
func (e *moneyEnv) opCancelSeries() {
	if len(e.series) == 0 {
		return
	}
	sr := e.series[e.rng.IntN(len(e.series))]
	e.op = fmt.Sprintf("cancel series %s of team %s", sr.id, e.names[sr.team])
	_, err := e.svc.CancelSeries(e.ctx, sr.team, sr.id)
	e.refused(err, core.ErrInvalidState)
	v, err := e.svc.GetSeries(e.ctx, sr.team, sr.id)
	if err != nil {
		e.fail("reading series %s: %v", sr.id, err)
	}
	e.cancelledNow(v.Series.Occurrences)
}
