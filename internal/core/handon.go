package core

import (
	"fmt"
	"time"
)

// Hand-over event types: a block's hours given to another team, or
// released for resale, and a resale's credit to the holder.
const (
	EventBlockTransferred = "block.transferred"
	EventBlockReceived    = "block.received"
	EventBlockReleased    = "block.released"
	EventBlockLending     = "block.lending"
	EventBlockLent        = "block.lent"
	EventBlockResold      = "block.resold"
)

// Hand-over kinds.
const (
	HandOverTransfer = "transfer"
	HandOverRelease  = "release"
)

// HandOnFrom returns the hour from which a block's hours can be handed on
// (transferred or released for resale) at now: its start when it has not
// started, else the next whole hour, which must come before its workloads
// are stopped ahead of its end. A plan's segment is handed on with its
// plan, never alone; a block waiting for approval has nothing to hand on
// yet.
func HandOnFrom(b Block, now time.Time, l Limits) (time.Time, error) {
	if b.PlanID != "" {
		return time.Time{}, fmt.Errorf("%w: block %s is a segment of plan %s; a plan's segments cannot be handed on one by one", ErrInvalidState, b.ID, b.PlanID)
	}
	switch {
	case b.State == StateScheduled && now.Before(b.Start):
		return b.Start, nil
	case b.State == StateScheduled || b.State == StateActive:
		h := now.Truncate(time.Hour).Add(time.Hour)
		if b.Terminating || !h.Before(b.End) || h.After(b.End.Add(-l.TerminateBefore)) {
			return time.Time{}, fmt.Errorf("%w: block %s ends at %s; no whole hour is left to hand on", ErrInvalidState, b.ID, b.End.Format(time.RFC3339))
		}
		return h, nil
	}
	return time.Time{}, fmt.Errorf("%w: block %s is %s; only scheduled or active blocks can be handed on", ErrInvalidState, b.ID, b.State)
}

// KeepUntil is the holder's block once its hours from h are handed on:
// cancelled when h is its start (it keeps nothing), otherwise ending at h,
// so that its workloads stop before h as at any end. Its fee is
// unchanged: it is what the holder paid.
func KeepUntil(b Block, h time.Time) Block {
	if !h.After(b.Start) {
		b.State = StateCancelled
		return b
	}
	b.End = h
	return b
}

// Received is the block a receiving team gets when b's hours from h are
// transferred to it: the same GPUs from h to b's end, scheduled (it
// becomes active at h like any block), its fee the transfer's price.
func Received(b Block, h time.Time, id, team string, price Money, now time.Time) Block {
	return Block{
		ID: id, Name: b.Name, Team: team, InstanceType: b.InstanceType, GPUModel: b.GPUModel,
		Count: b.Count, Zone: b.Zone, Start: h, End: b.End, State: StateScheduled,
		Fee: price, CreatedAt: now, Placements: b.Placements,
	}
}

// GPUs is the number of GPUs a block holds.
func (b *Block) GPUs() int { return gpuCount(b.Placements) }

func gpuCount(pls []Placement) int {
	n := 0
	for _, p := range pls {
		n += len(p.GPUs)
	}
	return n
}

// GPUHours is the GPU-hours that placements hold over [s, e), in whole
// hours.
func GPUHours(pls []Placement, s, e time.Time) int64 {
	if !e.After(s) {
		return 0
	}
	return int64(gpuCount(pls)) * int64(e.Sub(s)/time.Hour)
}

// OverlapGPUHours is the GPU-hours that two holdings share: the same GPUs
// of the same nodes over the hours both cover.
func OverlapGPUHours(a []Placement, as, ae time.Time, b []Placement, bs, be time.Time) int64 {
	s, e := later(as, bs), earlier(ae, be)
	if !e.After(s) {
		return 0
	}
	shared := 0
	for _, pa := range a {
		for _, pb := range b {
			if pa.Node != pb.Node {
				continue
			}
			for _, g := range pa.GPUs {
				for _, h := range pb.GPUs {
					if g == h {
						shared++
					}
				}
			}
		}
	}
	return int64(shared) * int64(e.Sub(s)/time.Hour)
}

// ResaleCredit is what a holder is credited when the resold GPU-hours of
// its release grow from before to after: its fee's share of them (fee
// over the boughtGPUHours it paid for), less feePercent. It is computed
// on the totals, so that the credits of successive resales sum to the
// credit of all of them at once, with no rounding drift.
func ResaleCredit(fee Money, boughtGPUHours, before, after int64, feePercent int) Money {
	credit := func(x int64) int64 {
		if boughtGPUHours <= 0 {
			return 0
		}
		return fee.Minor * x * int64(100-feePercent) / (boughtGPUHours * 100)
	}
	return Money{Minor: credit(after) - credit(before), Currency: fee.Currency}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
