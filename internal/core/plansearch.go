package core

import (
	"cmp"
	"fmt"
	"math/bits"
	"sort"
	"time"
)

// PlanSearchRequest asks for plan offerings: Count instances of Type for a
// total Duration inside [StartAfter, EndBefore], as one segment or as up
// to MaxSegments segments of the same type, count and zone. An empty Zone
// means all zones; zero MaxSegments and MaxResults mean the defaults.
type PlanSearchRequest struct {
	Type        string
	Count       int
	Duration    time.Duration
	StartAfter  time.Time
	EndBefore   time.Time
	Zone        string
	Target      string
	MaxSegments int
	MaxResults  int
	// Team and Quota, when Quota is set, bound the offerings as the team's
	// purchase would be bounded: each segment must pass its quota like a
	// block (the service fills Quota with the team's effective quota).
	Team  string
	Quota *Quota
}

// SearchPlans returns up to MaxResults plan offerings, unsigned, best
// first: the earliest end of the last segment, then the lowest fee, then
// the fewest segments. Each segment lasts at least the fleet's minimum
// duration, in whole hours on hour boundaries, and starts within the
// lead-time limit. A window where nothing fits gives an empty list.
//
// Per pool, the hours where count instances fit (by the hour-by-hour
// booked count, which placement honours for whole-node types) form runs
// of free hours; a plan of j segments is j pieces of j runs. The earliest
// completion with at most j segments ends in the first run r where the
// j−1 longest runs before r plus a piece at the start of r reach the
// duration; that piece is as short as it can be, and the earlier pieces
// give up their surplus from their starts. Alternatives repeat the search
// with the first start at least a day later.
func (ix *Index) SearchPlans(req PlanSearchRequest, now time.Time) ([]PlanOffering, error) {
	// 1. Validate against the operator's limits.
	q, err := ix.validateSearch(SearchRequest{Types: []string{req.Type}, Count: req.Count, Duration: req.Duration,
		StartAfter: req.StartAfter, EndBefore: req.EndBefore, Zone: req.Zone, MaxResults: req.MaxResults}, now)
	if err != nil {
		return nil, err
	}
	ps, err := ix.planQuery(req, q)
	if err != nil {
		return nil, err
	}
	var refused error // the first segment the team's quota refused
	if req.Quota != nil {
		// A request the quota refuses whatever the window (its count, its
		// earliest start) is refused as its purchase would be; starts
		// stop at the quota's lead limit.
		first := ix.timeOf(q.first)
		if err := CheckQuota(*req.Quota, req.Count, first, first.Add(time.Hour), now, 0); err != nil {
			return nil, err
		}
		if req.Quota.MaxLead > 0 {
			q.lastStart = min(q.lastStart, int(now.Add(req.Quota.MaxLead).Sub(ix.Origin)/time.Hour))
		}
	}
	// 2. Collect candidates per pool.
	var out []PlanOffering
	seen := map[string]bool{}
	t := q.types[0]
	for _, p := range ix.poolsFor(t, req.Zone) {
		hi := min(q.lastEnd, q.lastStart+ps.hours)
		runs := ix.freeRuns(p, t, req.Count, q.first, hi)
		prefix := p.usedPrefix(max(hi, 0), nil)
		lo, rounds := q.first, 0
		for rounds < q.maxResults {
			rounds++
			earliest := -1
			for j := 1; j <= ps.segments; j++ {
				segs, ok := planIn(runs, lo, j, ps, q.lastStart)
				if !ok || !ix.segmentsFit(p, t, req.Count, segs) {
					continue
				}
				o := ix.pricePlan(p, t, req.Count, segs, prefix, q, ps.target, now)
				if err := ix.checkPlanQuota(req, o, now); err != nil {
					refused = cmp.Or(refused, err)
				} else if key := planKey(o); !seen[key] {
					seen[key] = true
					out = append(out, o)
				}
				if earliest < 0 || segs[0].s < earliest {
					earliest = segs[0].s
				}
			}
			if earliest < 0 {
				break
			}
			lo = earliest + 24
		}
	}
	// 3. Rank and cut.
	if len(out) == 0 && refused != nil {
		return nil, refused
	}
	rankPlans(out)
	return out[:min(len(out), q.maxResults)], nil
}

// checkPlanQuota checks each segment of o against the quota of req's
// team, as PurchasePlan does; nil when req has no quota.
func (ix *Index) checkPlanQuota(req PlanSearchRequest, o PlanOffering, now time.Time) error {
	if req.Quota == nil {
		return nil
	}
	for i, sg := range o.Segments {
		if err := ix.CheckQuota(req.Team, *req.Quota, o.Count, sg.Start, sg.End, now); err != nil {
			return fmt.Errorf("segment %d of the plan: %w", i+1, err)
		}
	}
	return nil
}

// planSearch is what SearchPlans adds to a block search's validation.
type planSearch struct {
	hours    int // total
	minHours int // per segment
	segments int // at most
	target   string
}

func (ix *Index) planQuery(req PlanSearchRequest, q searchQuery) (planSearch, error) {
	ps := planSearch{hours: q.durations[0], segments: req.MaxSegments, target: req.Target}
	if ps.target == "" {
		ps.target = TargetTrainingJob
	}
	if !ValidTarget(ps.target) {
		return ps, Invalidf("target %q: want %s or %s", ps.target, TargetTrainingJob, TargetCluster)
	}
	if ps.segments == 0 {
		ps.segments = DefaultPlanSegments
	}
	if ps.segments < 1 || ps.segments > MaxPlanSegments {
		return ps, Invalidf("maxSegments %d is out of range: 1 to %d", ps.segments, MaxPlanSegments)
	}
	ps.minHours = max(1, int((ix.Fleet.Limits.MinDuration+time.Hour-1)/time.Hour))
	// No more segments than the duration can give each its minimum.
	ps.segments = min(ps.segments, ps.hours/ps.minHours)
	return ps, nil
}

// hourRun is a range of hours [s, e) from the index's origin.
type hourRun struct{ s, e int }

func (r hourRun) len() int { return r.e - r.s }

// freeRuns returns the maximal runs of hours in [lo, hi) where count
// instances of t fit in pool p by the pool's hour-by-hour count: whole
// nodes not busy for whole-node types, GPUs not booked for fractional
// ones (which segmentsFit then checks node by node).
func (ix *Index) freeRuns(p *pool, t InstanceType, count, lo, hi int) []hourRun {
	fits := func(h int) bool { return p.busyAt(h) <= int32(len(p.nodes)-count) }
	if t.GPUsPerInstance != p.gpus {
		limit := int32(len(p.nodes)*p.gpus - count*t.GPUsPerInstance)
		fits = func(h int) bool { return p.usedAt(h) <= limit }
	}
	var runs []hourRun
	start := -1
	for h := lo; h <= hi; h++ {
		free := h < hi && fits(h)
		switch {
		case free && start < 0:
			start = h
		case !free && start >= 0:
			runs = append(runs, hourRun{start, h})
			start = -1
		}
	}
	return runs
}

// planIn finds the plan of at most j segments in runs, none starting
// before lo or after lastStart, that completes earliest; its segments are
// in time order. It reports false when none fits.
func planIn(runs []hourRun, lo, j int, ps planSearch, lastStart int) ([]hourRun, bool) {
	var earlier []hourRun // usable pieces before the current run
	for _, r := range runs {
		r.s = max(r.s, lo)
		if r.len() < ps.minHours || r.s > lastStart {
			continue
		}
		// 1. The j−1 longest earlier pieces, longest (then latest) first,
		//    and as few of them as reach the duration with a minimal last piece.
		longest := append([]hourRun(nil), earlier...)
		sort.SliceStable(longest, func(a, b int) bool {
			if longest[a].len() != longest[b].len() {
				return longest[a].len() > longest[b].len()
			}
			return longest[a].s > longest[b].s
		})
		longest = longest[:min(len(longest), j-1)]
		sum := 0
		for _, x := range longest {
			sum += x.len()
		}
		last := max(ps.minHours, ps.hours-sum)
		if last > r.len() || last > ps.hours {
			earlier = append(earlier, r)
			continue
		}
		var chosen []hourRun
		for got := 0; got+last < ps.hours; {
			chosen = append(chosen, longest[len(chosen)])
			got += chosen[len(chosen)-1].len()
		}
		// 2. In time order; the earlier pieces give up the surplus.
		sort.Slice(chosen, func(a, b int) bool { return chosen[a].s < chosen[b].s })
		surplus := -ps.hours + last
		for _, x := range chosen {
			surplus += x.len()
		}
		for i := range chosen {
			// Starting later keeps the gaps short, and stays before the
			// lead-time limit: the piece still ends before r starts.
			cut := min(surplus, chosen[i].len()-ps.minHours)
			chosen[i].s += cut
			surplus -= cut
		}
		return append(chosen, hourRun{r.s, r.s + last}), true
	}
	return nil, false
}

// segmentsFit checks fractional segments node by node (whole-node ones
// fit by the count alone).
func (ix *Index) segmentsFit(p *pool, t InstanceType, count int, segs []hourRun) bool {
	if t.GPUsPerInstance == p.gpus {
		return true
	}
	for _, sg := range segs {
		n := 0
		for _, ni := range p.nodes {
			n += bits.OnesCount64(ix.freeMask(ni, sg.s, sg.e, nil)) / t.GPUsPerInstance
			if n >= count {
				break
			}
		}
		if n < count {
			return false
		}
	}
	return true
}

// pricePlan prices each segment as a block offering of its window would be.
func (ix *Index) pricePlan(p *pool, t InstanceType, count int, segs []hourRun, prefix []int64, q searchQuery, target string, now time.Time) PlanOffering {
	o := PlanOffering{Target: target, InstanceType: t.Name, Count: count, Zone: p.zone, ExpiresAt: q.expires}
	maxLead := int64(ix.Fleet.Limits.MaxLeadTime / time.Hour)
	for _, sg := range segs {
		d := sg.len()
		capacity := int64(len(p.nodes)) * int64(p.gpus) * int64(d)
		booked := (prefix[sg.e] - prefix[sg.s]) * 10000 / capacity
		lead := int64(ix.timeOf(sg.s).Sub(now) / time.Hour)
		factor := ix.Fleet.Pricing.Factor(booked, lead, maxLead)
		o.Segments = append(o.Segments, PlanSegment{
			Start:       ix.timeOf(sg.s),
			End:         ix.timeOf(sg.e),
			Fee:         ix.Fleet.Pricing.Fee(t.OnDemand, factor, d, count),
			OnDemandFee: OnDemandFee(t.OnDemand, d, count),
		})
	}
	return o
}

func planKey(o PlanOffering) string {
	key := o.InstanceType + "/" + o.Zone
	for _, s := range o.Segments {
		key += fmt.Sprintf("/%d-%d", s.Start.Unix(), s.End.Unix())
	}
	return key
}

// rankPlans sorts plan offerings best first: earliest end of the last
// segment, lowest fee, fewest segments, then by zone and first start so
// the order is stable.
func rankPlans(os []PlanOffering) {
	sort.SliceStable(os, func(i, j int) bool {
		a, b := os[i], os[j]
		if !a.End().Equal(b.End()) {
			return a.End().Before(b.End())
		}
		if fa, fb := a.Fee().Minor, b.Fee().Minor; fa != fb {
			return fa < fb
		}
		if len(a.Segments) != len(b.Segments) {
			return len(a.Segments) < len(b.Segments)
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		return a.Segments[0].Start.Before(b.Segments[0].Start)
	})
}
