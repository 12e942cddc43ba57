package core

import (
	"fmt"
	"math/bits"
	"sort"
	"time"
)

// Backfill runs preemptible work on GPUs nobody needs now: GPUs no block
// holds, and GPUs of blocks whose holder lends them (opted in, running no
// job there). Preemptible work never enters the index: searches and sales
// see its GPUs as free, and a block sold over them simply makes them
// needed at its start. Each allocation is warned Notice before its GPUs
// are needed and removed by then, so backfill never delays a block.

// BackfillRequest asks for Count instances of Type in Zone ("" for any)
// to run preemptible now.
type BackfillRequest struct {
	Type  InstanceType
	Count int
	Zone  string
}

// BackfillAlloc is one preemptible instance on GPUs of one node. NeededAt
// is when the GPUs are next needed (the earliest start of a block holding
// them, or the lending holder's job start); zero when nothing within the
// horizon needs them. Lent names the lending block whose GPUs it runs on
// at placement, "" on unsold GPUs.
type BackfillAlloc struct {
	ID       string
	Node     string
	GPUs     []int
	NeededAt time.Time
	Lent     string
}

// WarnAt is when the allocation must be warned: notice before its GPUs
// are needed; zero when they are not.
func (a BackfillAlloc) WarnAt(notice time.Duration) time.Time {
	if a.NeededAt.IsZero() {
		return time.Time{}
	}
	return a.NeededAt.Add(-notice)
}

// BackfillStep is what a running allocation needs now.
type BackfillStep int

const (
	BackfillRun    BackfillStep = iota // keep running
	BackfillWarn                       // warn it: its GPUs are needed within the notice
	BackfillRemove                     // remove it: its GPUs are needed now
)

// Step says what a running allocation needs at now, given the notice.
func (a BackfillAlloc) Step(notice time.Duration, now time.Time) BackfillStep {
	switch {
	case a.NeededAt.IsZero():
		return BackfillRun
	case !now.Before(a.NeededAt):
		return BackfillRemove
	case !now.Before(a.WarnAt(notice)):
		return BackfillWarn
	}
	return BackfillRun
}

// Lending is a block whose holder lends its GPUs. NeededAt is when the
// holder needs them back (a job of the holder's starting; in the past
// while one runs); zero while the holder runs nothing there.
type Lending struct {
	BlockID  string
	NeededAt time.Time
}

// gpuNeeds is, for each GPU of a node, when it is next needed (zero:
// never within the horizon) and the lending block lending it now.
type gpuNeeds struct {
	at   [64]time.Time
	lent [64]string
}

// needsOf computes the needs of node ni at now. Blocks whose window ended
// before now's hour are ignored; a block covering now needs its GPUs at
// its start (already past), unless it lends them.
func (ix *Index) needsOf(ni int, now time.Time, lending map[string]time.Time) gpuNeeds {
	var n gpuNeeds
	ns := &ix.nodes[ni]
	if ns.node.Health == Unhealthy {
		for g := range ns.node.GPUs {
			n.at[g] = now // a sick node is needed back at once
		}
		return n
	}
	hNow := ix.floorHour(now)
	for a := range ns.allocs.all() {
		if a.end <= hNow {
			continue
		}
		start := ix.timeOf(a.start)
		at := start
		lendAt, lends := lending[a.block]
		if lends {
			if a.start <= hNow {
				for m := a.mask; m != 0; m &= m - 1 {
					n.lent[bits.TrailingZeros64(m)] = a.block
				}
			}
			if lendAt.IsZero() {
				continue // lent for its whole window
			}
			at = later(lendAt, start)
		}
		for m := a.mask; m != 0; m &= m - 1 {
			g := bits.TrailingZeros64(m)
			if n.at[g].IsZero() || at.Before(n.at[g]) {
				n.at[g] = at
			}
		}
	}
	return n
}

// floorHour is the hour of the index that t falls in (0 before Origin).
func (ix *Index) floorHour(t time.Time) int {
	if !t.After(ix.Origin) {
		return 0
	}
	return int(t.Sub(ix.Origin) / time.Hour)
}

func lendingMap(lending []Lending) map[string]time.Time {
	m := make(map[string]time.Time, len(lending))
	for _, l := range lending {
		m[l.BlockID] = l.NeededAt
	}
	return m
}

// BackfillPlace decides where a preemptible request runs now: on GPUs not
// held by running (other preemptible allocations) and not needed within
// notice of now. Each instance goes where its GPUs are needed latest (so
// it is preempted least), then on the fullest node (so whole nodes stay
// free), then by node name. It is all or nothing: ErrNoCapacity when the
// request does not fit. The allocations' ids are empty; the caller names
// them.
func (ix *Index) BackfillPlace(req BackfillRequest, running []BackfillAlloc, lending []Lending, notice time.Duration, now time.Time) ([]BackfillAlloc, error) {
	if req.Count < 1 {
		return nil, Invalidf("instance count %d must be at least 1", req.Count)
	}
	g := req.Type.GPUsPerInstance
	lend := lendingMap(lending)
	taken := ix.takenBy(running)
	horizon := now.Add(notice)
	type cand struct {
		ni    int
		needs gpuNeeds
		free  []int // usable GPUs, needed latest first
	}
	var cands []*cand
	for _, p := range ix.poolsFor(req.Type, req.Zone) {
		for _, ni := range p.nodes {
			if ix.nodes[ni].node.Health == Unhealthy {
				continue
			}
			c := &cand{ni: ni, needs: ix.needsOf(ni, now, lend)}
			for gi := range ix.nodes[ni].node.GPUs {
				at := c.needs.at[gi]
				if taken[ni]&(1<<gi) == 0 && (at.IsZero() || at.After(horizon)) {
					c.free = append(c.free, gi)
				}
			}
			if len(c.free) >= g {
				cands = append(cands, c)
			}
		}
	}
	// needLater orders needs, zero (never) last.
	needLater := func(a, b time.Time) bool {
		if a.IsZero() || b.IsZero() {
			return a.IsZero() && !b.IsZero()
		}
		return a.After(b)
	}
	var out []BackfillAlloc
	for range req.Count {
		var best *cand
		var bestGPUs []int
		var bestAt time.Time
		for _, c := range cands {
			if len(c.free) < g {
				continue
			}
			free := append([]int(nil), c.free...)
			sort.SliceStable(free, func(i, j int) bool { return needLater(c.needs.at[free[i]], c.needs.at[free[j]]) })
			gpus := free[:g]
			at := time.Time{}
			for _, gi := range gpus {
				if x := c.needs.at[gi]; !x.IsZero() && (at.IsZero() || x.Before(at)) {
					at = x
				}
			}
			better := best == nil
			if !better {
				switch {
				case !at.Equal(bestAt):
					better = needLater(at, bestAt)
				case len(c.free) != len(best.free):
					better = len(c.free) < len(best.free)
				default:
					better = ix.nodes[c.ni].node.Name < ix.nodes[best.ni].node.Name
				}
			}
			if better {
				best, bestGPUs, bestAt = c, gpus, at
			}
		}
		if best == nil {
			return nil, fmt.Errorf("%w: only %d of %d %s free for backfill in %s now", ErrNoCapacity,
				len(out), req.Count, req.Type.Name, zoneOrAny(req.Zone))
		}
		gpus := append([]int(nil), bestGPUs...)
		sort.Ints(gpus)
		out = append(out, BackfillAlloc{Node: ix.nodes[best.ni].node.Name, GPUs: gpus, NeededAt: bestAt, Lent: best.needs.lent[gpus[0]]})
		keep := best.free[:0:0]
		for _, gi := range best.free {
			if !containsInt(gpus, gi) {
				keep = append(keep, gi)
			}
		}
		best.free = keep
	}
	return out, nil
}

// BackfillDue recomputes when each running allocation's GPUs are needed,
// as the index now stands (blocks sold over them since, a lending holder
// starting a job, a node turned unhealthy). An allocation on a node the
// fleet no longer has is needed at once.
func (ix *Index) BackfillDue(running []BackfillAlloc, lending []Lending, now time.Time) []BackfillAlloc {
	lend := lendingMap(lending)
	needs := map[int]gpuNeeds{}
	out := make([]BackfillAlloc, len(running))
	for i, a := range running {
		out[i] = a
		ni, ok := ix.nodeIdx[a.Node]
		if !ok {
			out[i].NeededAt = now
			continue
		}
		n, ok := needs[ni]
		if !ok {
			n = ix.needsOf(ni, now, lend)
			needs[ni] = n
		}
		out[i].NeededAt = time.Time{}
		for _, gi := range a.GPUs {
			if gi < 0 || gi >= 64 {
				continue
			}
			if x := n.at[gi]; !x.IsZero() && (out[i].NeededAt.IsZero() || x.Before(out[i].NeededAt)) {
				out[i].NeededAt = x
			}
		}
	}
	return out
}

// takenBy returns, per node index, the GPUs running allocations hold.
func (ix *Index) takenBy(running []BackfillAlloc) map[int]uint64 {
	taken := map[int]uint64{}
	for _, a := range running {
		ni, ok := ix.nodeIdx[a.Node]
		if !ok {
			continue
		}
		for _, gi := range a.GPUs {
			if gi >= 0 && gi < 64 {
				taken[ni] |= 1 << gi
			}
		}
	}
	return taken
}

func zoneOrAny(z string) string {
	if z == "" {
		return "any zone"
	}
	return z
}
