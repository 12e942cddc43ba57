package core

import (
	"math/bits"
	"time"
)

// PriceStart is one possible start of a block in a price calendar: the
// fee a block of the asked shape would cost if it started then, and
// whether the capacity is free for all of its hours. Zone is the zone
// quoted: the cheapest with room, or, when none has room, the cheapest.
type PriceStart struct {
	Start       time.Time
	Zone        string
	Fee         Money
	OnDemandFee Money
	Available   bool
}

// PriceCalendar prices every hourly start of count instances of one type
// for an exact duration within [StartAfter, EndBefore): the same limits,
// quotas and pricing as Search, so that a start picked here is one that
// Search offers when asked for that hour alone. It reads the index only.
func (ix *Index) PriceCalendar(req SearchRequest, now time.Time) ([]PriceStart, error) {
	// 1. Validate as a search of one type and one exact duration.
	if len(req.Types) != 1 {
		return nil, Invalidf("a price calendar is for exactly one instance type")
	}
	if req.Duration <= 0 || req.MinDuration > 0 || req.MaxDuration > 0 {
		return nil, Invalidf("a price calendar needs one exact duration, not a range")
	}
	q, err := ix.validateSearch(req, now)
	if err != nil {
		return nil, err
	}
	t := q.types[0]
	quota, limited := req.Quotas[t.Name]
	if limited {
		if q, err = ix.quotaQuery(q, quota, req.Count, now); err != nil {
			return nil, err
		}
	}
	d := q.durations[0]
	lo, hi := q.first, min(q.lastEnd-d, q.lastStart)
	if hi < lo {
		return []PriceStart{}, nil
	}
	// 2. Price and check every start in every pool; keep the best per start.
	out := make([]PriceStart, hi-lo+1)
	onDemand := OnDemandFee(t.OnDemand, d, req.Count)
	maxLead := int64(ix.Fleet.Limits.MaxLeadTime / time.Hour)
	for _, p := range ix.poolsFor(t, req.Zone) {
		prefix := p.usedPrefix(hi+d, nil)
		capacity := int64(len(p.nodes)) * int64(p.gpus) * int64(d)
		free := ix.startsFree(p, t.GPUsPerInstance, req.Count, d, lo, hi)
		for s := lo; s <= hi; s++ {
			booked := (prefix[s+d] - prefix[s]) * 10000 / capacity
			lead := int64(ix.timeOf(s).Sub(now) / time.Hour)
			fee := ix.Fleet.Pricing.Fee(t.OnDemand, ix.Fleet.Pricing.Factor(booked, lead, maxLead), d, req.Count)
			c := PriceStart{Start: ix.timeOf(s), Zone: p.zone, Fee: fee, OnDemandFee: onDemand, Available: free[s-lo]}
			if better(c, out[s-lo]) {
				out[s-lo] = c
			}
		}
	}
	// 3. A start that would take the team above the instances it may hold
	//    at once is not available to it, as Search leaves it out.
	if limited {
		for i := range out {
			if out[i].Available && ix.CheckQuota(quota.Team, quota, req.Count, out[i].Start, out[i].Start.Add(time.Duration(d)*time.Hour), now) != nil {
				out[i].Available = false
			}
		}
	}
	return out, nil
}

// better reports whether c is a better quote for its start than cur (the
// zero value when none yet): room first, then the lower fee, then the
// zone's name so that the answer is stable.
func better(c, cur PriceStart) bool {
	switch {
	case cur.Zone == "":
		return true
	case c.Available != cur.Available:
		return c.Available
	case c.Fee.Minor != cur.Fee.Minor:
		return c.Fee.Minor < cur.Fee.Minor
	}
	return c.Zone < cur.Zone
}

// startsFree says for each start s in [lo, hi] whether count instances of
// g GPUs fit in p for [s, s+d). Whole nodes are read from the pool's
// busy counts (a sliding window, as wholeStarts); fractional instances
// walk the nodes, only at starts the pool-wide GPU count allows.
func (ix *Index) startsFree(p *pool, g, count, d, lo, hi int) []bool {
	free := make([]bool, hi-lo+1)
	if g == p.gpus {
		p.wholeStarts(count, d, lo, hi, func(s int) { free[s-lo] = true })
		return free
	}
	limit := int32(len(p.nodes)*p.gpus - count*g)
	if limit < 0 {
		return free
	}
	lastBad := lo - 1
	for h := lo; h < hi+d; h++ {
		if p.usedAt(h) > limit {
			lastBad = h
		}
		s := h - d + 1
		if s < lo || s > hi || lastBad >= s {
			continue
		}
		n := 0
		for _, ni := range p.nodes {
			n += bits.OnesCount64(ix.freeMask(ni, s, s+d, nil)) / g
			if n >= count {
				break
			}
		}
		free[s-lo] = n >= count
	}
	return free
}
