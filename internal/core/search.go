package core

import (
	"cmp"
	"fmt"
	"sort"
	"time"
)

// SearchRequest asks for offerings. Exactly one of Duration or the
// MinDuration/MaxDuration range is set; Types lists one or more instance
// types; an empty Zone means all zones. Team is the team that would buy
// (the service fills Quotas from it); Quotas holds its effective quota
// per instance type, and a type without one is bounded by the operator's
// limits alone.
type SearchRequest struct {
	Types       []string
	Count       int
	Duration    time.Duration
	MinDuration time.Duration
	MaxDuration time.Duration
	StartAfter  time.Time
	EndBefore   time.Time
	Zone        string
	MaxResults  int
	Team        string
	Quotas      map[string]Quota
}

// Search returns up to MaxResults offerings, unsigned, best first: those
// of the duration asked for (any duration of a range), earliest start,
// then lowest fee; then, for an exact duration, one slightly shorter and
// one slightly longer offering where they exist, marked Alternative and
// ranked the same way among themselves. An alternative never displaces
// the best offering of the duration asked for. A window where nothing
// fits gives an empty list, not an error.
//
// Offerings respect the team's quota of each type (req.Quotas), as a
// purchase does: a type whose quota refuses the request itself (count,
// duration, a start too far ahead) is skipped, and when every type is,
// the search answers the first refusal (ErrQuotaExceeded, naming the
// limit). Starts stop at the quota's lead limit, a longer alternative
// beyond its longest block is not offered, and an offering that would
// take the team above the instances it may hold is left out; when that
// leaves nothing, the search answers that refusal instead of an empty
// list.
func (ix *Index) Search(req SearchRequest, now time.Time) ([]Offering, error) {
	// 1. Validate against the operator's limits.
	q, err := ix.validateSearch(req, now)
	if err != nil {
		return nil, err
	}
	// 2. Collect candidates per type, pool and duration, within the
	//    type's quota.
	var exact, shorter, longer []Offering
	var refused, overHeld error
	searched := false
	var prefix []int64 // reused by every pool
	for _, t := range q.types {
		quota, limited := req.Quotas[t.Name]
		tq := q
		if limited {
			if tq, err = ix.quotaQuery(q, quota, req.Count, now); err != nil {
				refused = cmp.Or(refused, err)
				continue
			}
		}
		searched = true
		var typeExact, typeShorter, typeLonger []Offering
		for _, p := range ix.poolsFor(t, req.Zone) {
			// Prefix sums of booked GPUs, for pricing, once per pool, in
			// one buffer for every pool.
			longest := max(tq.durations[len(tq.durations)-1], tq.longer)
			prefix = p.usedPrefix(max(min(tq.lastEnd, tq.lastStart+longest), 0), prefix)
			for _, d := range tq.durations {
				typeExact = append(typeExact, ix.candidates(p, t, req.Count, d, tq, prefix, now)...)
			}
			if tq.shorter > 0 {
				typeShorter = append(typeShorter, ix.candidates(p, t, req.Count, tq.shorter, tq, prefix, now)...)
			}
			if tq.longer > 0 {
				typeLonger = append(typeLonger, ix.candidates(p, t, req.Count, tq.longer, tq, prefix, now)...)
			}
		}
		if limited {
			typeExact = ix.withinHeld(typeExact, quota, now, &overHeld)
			typeShorter = ix.withinHeld(typeShorter, quota, now, &overHeld)
			typeLonger = ix.withinHeld(typeLonger, quota, now, &overHeld)
		}
		exact = append(exact, typeExact...)
		shorter = append(shorter, typeShorter...)
		longer = append(longer, typeLonger...)
	}
	if !searched {
		return nil, refused
	}
	// 3. Rank and pick: the duration asked for first, then the alternatives.
	rank(exact)
	rank(shorter)
	rank(longer)
	var extras []Offering
	if len(shorter) > 0 {
		extras = append(extras, shorter[0])
	}
	if len(longer) > 0 {
		extras = append(extras, longer[0])
	}
	n := q.maxResults - len(extras)
	if n < 1 && len(exact) > 0 {
		n, extras = 1, extras[:q.maxResults-1]
	}
	rank(extras)
	for i := range extras {
		extras[i].Alternative = true
	}
	out := append(exact[:min(n, len(exact))], extras...)
	if len(out) == 0 && overHeld != nil {
		return nil, overHeld
	}
	return out, nil
}

// quotaQuery narrows q to what quota lets its team buy: a request that no
// offering within it could meet is refused as a purchase would be (the
// count alone above the instances it may hold, the count per block, a
// duration, the earliest start beyond the lead limit); otherwise starts
// stop at the lead limit and a longer alternative beyond the longest
// block is dropped.
func (ix *Index) quotaQuery(q searchQuery, quota Quota, count int, now time.Time) (searchQuery, error) {
	first := ix.timeOf(q.first)
	for _, h := range q.durations {
		if err := CheckQuota(quota, count, first, first.Add(time.Duration(h)*time.Hour), now, 0); err != nil {
			return q, err
		}
	}
	if quota.MaxLead > 0 {
		q.lastStart = min(q.lastStart, int(now.Add(quota.MaxLead).Sub(ix.Origin)/time.Hour))
	}
	if quota.MaxDuration > 0 && time.Duration(q.longer)*time.Hour > quota.MaxDuration {
		q.longer = 0
	}
	return q, nil
}

// withinHeld keeps the offerings that would not take quota's team above
// the instances it may hold at once, and records the first refusal in
// refused when it has none yet.
func (ix *Index) withinHeld(os []Offering, quota Quota, now time.Time, refused *error) []Offering {
	kept := os[:0]
	for _, o := range os {
		if err := ix.CheckQuota(quota.Team, quota, o.Count, o.Start, o.End, now); err != nil {
			*refused = cmp.Or(*refused, err)
			continue
		}
		kept = append(kept, o)
	}
	return kept
}

type searchQuery struct {
	types           []InstanceType
	durations       []int // hours
	shorter, longer int   // hours; 0 when none
	first           int   // earliest start hour from Origin
	lastStart       int   // latest start hour (the lead-time limit)
	lastEnd         int   // latest end hour (the window)
	maxResults      int
	expires         time.Time
}

func (ix *Index) validateSearch(req SearchRequest, now time.Time) (searchQuery, error) {
	l := ix.Fleet.Limits
	q := searchQuery{maxResults: req.MaxResults, expires: now.Add(l.OfferingTTL)}
	if q.maxResults <= 0 {
		q.maxResults = l.MaxResults
	}
	if len(req.Types) == 0 {
		return q, Invalidf("at least one instance type is required")
	}
	for _, name := range req.Types {
		t, ok := ix.Fleet.Type(name)
		if !ok {
			return q, Invalidf("unknown instance type %q (GET /v1/instance-types lists them)", name)
		}
		q.types = append(q.types, t)
	}
	if req.Count < 1 || req.Count > l.MaxInstancesPerBlock {
		return q, Invalidf("instance count %d is out of range: 1 to %d per block", req.Count, l.MaxInstancesPerBlock)
	}
	var ds []time.Duration
	switch {
	case req.Duration > 0 && (req.MinDuration > 0 || req.MaxDuration > 0):
		return q, Invalidf("give either a duration or a duration range, not both")
	case req.Duration > 0:
		ds = []time.Duration{req.Duration}
	case req.MinDuration > 0 && req.MaxDuration >= req.MinDuration:
		ds = []time.Duration{req.MinDuration, (req.MinDuration + req.MaxDuration) / 2, req.MaxDuration}
	case req.MinDuration > 0 || req.MaxDuration > 0:
		return q, Invalidf("duration range needs both bounds, the minimum not above the maximum")
	default:
		return q, Invalidf("a duration is required")
	}
	for _, d := range ds {
		if d < l.MinDuration || d > l.MaxDuration {
			return q, Invalidf("duration %s is out of range: %s to %s", fmtHours(d), fmtHours(l.MinDuration), fmtHours(l.MaxDuration))
		}
		if d%time.Hour != 0 && req.Duration > 0 {
			return q, Invalidf("duration %s is not a whole number of hours", d)
		}
		h := int(d / time.Hour)
		if len(q.durations) == 0 || q.durations[len(q.durations)-1] != h {
			q.durations = append(q.durations, h)
		}
	}
	if req.Duration > 0 {
		h := q.durations[0]
		delta := max(1, (h+5)/10)
		if d := time.Duration(h-delta) * time.Hour; d >= l.MinDuration {
			q.shorter = h - delta
		}
		if d := time.Duration(h+delta) * time.Hour; d <= l.MaxDuration {
			q.longer = h + delta
		}
	}
	if req.StartAfter.IsZero() || req.EndBefore.IsZero() {
		return q, Invalidf("startAfter and endBefore are required")
	}
	if !req.EndBefore.After(req.StartAfter) {
		return q, Invalidf("endBefore %s must be after startAfter %s", req.EndBefore.Format(time.RFC3339), req.StartAfter.Format(time.RFC3339))
	}
	earliest := now.Add(l.MinLeadTime)
	latest := now.Add(l.MaxLeadTime)
	if !req.EndBefore.After(earliest) {
		return q, Invalidf("the window ends %s, in the past or sooner than the minimum lead time of %s", req.EndBefore.Format(time.RFC3339), l.MinLeadTime)
	}
	if req.StartAfter.After(latest) {
		return q, Invalidf("startAfter %s is beyond the booking horizon: blocks start at most %s ahead (by %s)", req.StartAfter.Format(time.RFC3339), fmtHours(l.MaxLeadTime), latest.Format(time.RFC3339))
	}
	from := req.StartAfter
	if from.Before(earliest) {
		from = earliest
	}
	q.first = ix.hourOf(from)
	if ix.timeOf(q.first).Before(from) {
		q.first++
	}
	q.lastEnd = int(req.EndBefore.Sub(ix.Origin) / time.Hour)
	q.lastStart = int(latest.Sub(ix.Origin) / time.Hour)
	return q, nil
}

func fmtHours(d time.Duration) string { return fmt.Sprintf("%dh", int(d/time.Hour)) }

// rank sorts offerings best first: earliest start, lowest fee, then by
// type, zone and duration so the order is stable.
func rank(os []Offering) {
	sort.SliceStable(os, func(i, j int) bool {
		a, b := os[i], os[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		if a.Fee.Minor != b.Fee.Minor {
			return a.Fee.Minor < b.Fee.Minor
		}
		if a.InstanceType != b.InstanceType {
			return a.InstanceType < b.InstanceType
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.End.Before(b.End)
	})
}
