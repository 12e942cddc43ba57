package service

import (
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// moneyModel is what the money property test (money_property_test.go)
// expects of the money: what each block's escrow holds, each team's
// wallet and the operator's revenue, spot runs apart (their price is
// the run's, checked in its journal); and, for each block, the fee its
// hours were bought for, what its team paid for them (net of refunds),
// when its hours were first bought, and the releases open for resale.
// It takes the operations' answers (a block bought, extended,
// cancelled, handed on), and from the store only what no answer says:
// how many GPU-hours of a release a purchase resold, whether a block
// waiting for approval failed. The money of each step it computes
// itself, by the policy, never from the journals.
type moneyModel struct {
	blocks   map[string]*modelBlock
	order    []*modelBlock // in the order they came
	releases []*modelRelease
	wallets  map[string]int64 // by team
	revenue  int64
	// dirty are the blocks whose escrow the last operation moved.
	dirty map[string]bool
}

type modelBlock struct {
	id, team    string
	gpus        int64 // GPUs held
	start, end  time.Time
	hoursStart  time.Time // of the hours as first bought
	fee, escrow int64
	paid        int64 // by its team, less what it had back
	pending     bool  // waiting for approval
	cancelled   bool
}

type modelRelease struct {
	id         string
	holder     *modelBlock
	gpuModel   string
	fee        int64 // the holder's fee when released
	bought     int64 // GPU-hours the holder's fee paid for
	feePercent int   // the resale fee
	from, till time.Time
	gpuHours   int64
	resold     int64
	placements []core.Placement
}

func newMoneyModel() *moneyModel {
	return &moneyModel{blocks: map[string]*modelBlock{}, wallets: map[string]int64{}, dirty: map[string]bool{}}
}

func (m *moneyModel) isBlock(id string) bool { _, ok := m.blocks[id]; return ok }

// add records a new block, its escrow empty.
func (m *moneyModel) add(b core.Block) *modelBlock {
	mb := &modelBlock{id: b.ID, team: b.Team, gpus: int64(b.Count * gpusPer(b.InstanceType)),
		start: b.Start, end: b.End, hoursStart: b.Start, pending: b.State == core.StatePaymentPending}
	m.blocks[b.ID] = mb
	m.order = append(m.order, mb)
	m.dirty[b.ID] = true
	return mb
}

// bought records a block its team bought for its fee.
func (m *moneyModel) bought(b core.Block) *modelBlock {
	mb := m.add(b)
	mb.fee, mb.escrow, mb.paid = b.Fee.Minor, b.Fee.Minor, b.Fee.Minor
	m.wallets[b.Team] -= b.Fee.Minor
	return mb
}

// extended records an extension of b to end bought for fee.
func (m *moneyModel) extended(b *modelBlock, end time.Time, fee int64) {
	b.end = end
	b.fee += fee
	b.escrow += fee
	b.paid += fee
	m.wallets[b.team] -= fee
	m.dirty[b.id] = true
}

// refund is what cancelling b at now refunds under the policy: the
// policy's percent of what its team paid for the hours (at most what the
// escrow holds), before or after the hours' first start.
func (m *moneyModel) refund(b *modelBlock, now time.Time, l core.Limits) int64 {
	pct := l.RefundBeforeStart
	if !now.Before(b.hoursStart) {
		pct = l.RefundAfterStart
	}
	return max(min(b.paid, b.escrow), 0) * int64(pct) / 100
}

// cancelledAt records b cancelled at now, refunded under the policy.
func (m *moneyModel) cancelledAt(b *modelBlock, now time.Time, l core.Limits) {
	r := m.refund(b, now, l)
	b.escrow -= r
	b.paid -= r
	b.cancelled = true
	m.wallets[b.team] += r
	m.dirty[b.id] = true
}

// paymentFailed records b never approved: its fee reversed in full.
func (m *moneyModel) paymentFailed(b *modelBlock) {
	b.escrow -= b.fee
	b.paid -= b.fee
	b.pending = false
	b.cancelled = true
	m.wallets[b.team] += b.fee
	m.dirty[b.id] = true
}

// transferred records b's hours from recv's start handed on to recv's
// team for price: the share of b's fee for those hours leaves b's escrow
// for recv's, the price the receiver's wallet for the holder's. It
// returns the share.
func (m *moneyModel) transferred(b *modelBlock, kept, recv core.Block, price int64) int64 {
	all := b.gpus * int64(b.end.Sub(b.start)/time.Hour)
	part := b.gpus * int64(recv.End.Sub(recv.Start)/time.Hour)
	share := int64(0)
	if all > 0 {
		share = b.fee * part / all
	}
	b.escrow -= share
	b.end = recv.Start
	b.cancelled = kept.State == core.StateCancelled
	r := m.add(recv)
	r.fee, r.escrow, r.paid, r.hoursStart = share, share, price, b.hoursStart
	m.wallets[recv.Team] -= price
	m.wallets[b.team] += price
	m.dirty[b.id] = true
	return share
}

// released records b's hours from ho.From released for resale.
func (m *moneyModel) released(b *modelBlock, kept core.Block, ho contract.Handover) {
	m.releases = append(m.releases, &modelRelease{id: ho.ID, holder: b, gpuModel: kept.GPUModel, fee: b.fee,
		bought: b.gpus * int64(b.end.Sub(b.start)/time.Hour), feePercent: ho.FeePercent, from: ho.From, till: ho.Until,
		gpuHours: ho.GPUHours, placements: kept.Placements})
	b.end = ho.From
	b.cancelled = kept.State == core.StateCancelled
}

// resold records that r's resold GPU-hours grew to total: the fee's
// share of them leaves the holder's escrow, the holder credited it less
// the resale fee, which the operator keeps.
func (m *moneyModel) resold(r *modelRelease, total int64) {
	share := core.ResaleCredit(core.Money{Minor: r.fee}, r.bought, r.resold, total, 0).Minor
	credit := core.ResaleCredit(core.Money{Minor: r.fee}, r.bought, r.resold, total, r.feePercent).Minor
	r.holder.escrow -= share
	m.wallets[r.holder.team] += credit
	m.revenue += share - credit
	r.resold = total
	m.dirty[r.holder.id] = true
}

// meets reports whether any of blocks is of the released GPUs' model
// and meets the released hours.
func (r *modelRelease) meets(blocks []core.Block) bool {
	for _, b := range blocks {
		if b.GPUModel == r.gpuModel && b.Start.Before(r.till) && r.from.Before(b.End) {
			return true
		}
	}
	return false
}

// overlap is the GPU-hours of released hours that blocks take.
func (r *modelRelease) overlap(blocks []core.Block) int64 {
	var ov int64
	for _, b := range blocks {
		ov += core.OverlapGPUHours(b.Placements, b.Start, b.End, r.placements, r.from, r.till)
	}
	return min(ov, r.gpuHours-r.resold)
}
