package core

import (
	"math/bits"
	"time"
)

// candidates lists offerings of count instances of t for d hours in pool
// p: the earliest feasible start, then starts at least a day apart, and
// the cheapest feasible start, up to q.maxResults. prefix holds the
// pool's prefix sums of booked GPUs over at least the hours searched.
func (ix *Index) candidates(p *pool, t InstanceType, count, d int, q searchQuery, prefix []int64, now time.Time) []Offering {
	lo, hi := q.first, min(q.lastEnd-d, q.lastStart)
	if hi < lo {
		return nil
	}
	capacity := int64(len(p.nodes)) * int64(p.gpus) * int64(d)
	factor := func(s int) int64 {
		booked := (prefix[s+d] - prefix[s]) * 10000 / capacity
		lead := int64(ix.timeOf(s).Sub(now) / time.Hour)
		return ix.Fleet.Pricing.Factor(booked, lead, int64(ix.Fleet.Limits.MaxLeadTime/time.Hour))
	}
	// Each feasible start is seen once, in order, and none is kept but
	// those picked: a search allocates nothing per hour of its window.
	var picked []int
	cheapest, cheapestF := -1, int64(0)
	consider := func(s int) {
		if len(picked) < q.maxResults && (len(picked) == 0 || s >= picked[len(picked)-1]+24) {
			picked = append(picked, s)
		}
		if f := factor(s); cheapest < 0 || f < cheapestF {
			cheapest, cheapestF = s, f
		}
	}
	if t.GPUsPerInstance == p.gpus {
		p.wholeStarts(count, d, lo, hi, consider)
	} else {
		for _, s := range ix.fractionalStarts(p, t.GPUsPerInstance, count, d, lo, hi, q.maxResults) {
			consider(s)
		}
	}
	if cheapest < 0 {
		return nil
	}
	if !containsInt(picked, cheapest) {
		picked = append(picked, cheapest)
	}
	out := make([]Offering, 0, len(picked))
	for _, s := range picked {
		out = append(out, Offering{
			Kind:         KindBlock,
			InstanceType: t.Name,
			Count:        count,
			Zone:         p.zone,
			Start:        ix.timeOf(s),
			End:          ix.timeOf(s + d),
			Fee:          ix.Fleet.Pricing.Fee(t.OnDemand, factor(s), d, count),
			OnDemandFee:  OnDemandFee(t.OnDemand, d, count),
			ExpiresAt:    q.expires,
		})
	}
	return out
}

// wholeStarts calls visit with each start s in [lo, hi], in order, where
// count whole nodes are free at every hour of [s, s+d): a sliding-window
// maximum of the busy count, linear in the window.
func (p *pool) wholeStarts(count, d, lo, hi int, visit func(s int)) {
	limit := int32(len(p.nodes) - count)
	if limit < 0 {
		return
	}
	// Walk the hours, remembering the last hour that was too busy: a start
	// s is feasible when no too-busy hour lies in [s, s+d).
	lastBad := lo - 1
	for h := lo; h < hi+d; h++ {
		if p.busyAt(h) > limit {
			lastBad = h
		}
		if s := h - d + 1; s >= lo && s <= hi && lastBad < s {
			visit(s)
		}
	}
}

// fractionalStarts returns up to a few feasible starts for fractional
// instances, scanning nodes only where the pool-wide GPU count allows.
func (ix *Index) fractionalStarts(p *pool, g, count, d, lo, hi, want int) []int {
	limit := int32(len(p.nodes)*p.gpus - count*g)
	if limit < 0 {
		return nil
	}
	var out []int
	lastBad := lo - 1
	for h := lo; h < hi+d; h++ {
		if p.usedAt(h) > limit {
			lastBad = h
		}
		s := h - d + 1
		if s < lo || s > hi || lastBad >= s {
			continue
		}
		if len(out) > 0 && s < out[len(out)-1]+24 {
			continue
		}
		n := 0
		for _, ni := range p.nodes {
			n += bits.OnesCount64(ix.freeMask(ni, s, s+d, nil)) / g
			if n >= count {
				break
			}
		}
		if n >= count {
			out = append(out, s)
			if len(out) >= want {
				break
			}
		}
	}
	return out
}

func (p *pool) usedAt(h int) int32 {
	if h < len(p.used) {
		return p.used[h]
	}
	return 0
}

// usedPrefix returns prefix sums of used GPUs over hours [0, n], in buf
// when it has room.
func (p *pool) usedPrefix(n int, buf []int64) []int64 {
	out := buf[:0]
	if cap(out) < n+1 {
		out = make([]int64, n+1)
	}
	out = out[:n+1]
	out[0] = 0
	for h := range n {
		out[h+1] = out[h] + int64(p.usedAt(h))
	}
	return out
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
