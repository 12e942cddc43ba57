package core

import (
	"sort"
	"time"
)

// Held returns the most instances the team holds at once in [start, end)
// in live blocks (of instanceType only, when not empty).
func (ix *Index) Held(team, instanceType string, start, end time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, b := range ix.byTeam[team] {
		if instanceType != "" && b.InstanceType != instanceType {
			continue
		}
		if !b.Start.Before(end) || !start.Before(b.End) {
			continue
		}
		edges = append(edges, edge{maxTime(b.Start, start), b.Count}, edge{minTime(b.End, end), -b.Count})
	}
	// Ends sort before starts at the same instant: [a,b) then [b,c) never overlap.
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	return most
}

// CheckQuota checks a block of count instances over [start, end) for the
// team against its quota q (see the function CheckQuota), counting what
// the team already holds only when q limits it.
func (ix *Index) CheckQuota(team string, q Quota, count int, start, end, now time.Time) error {
	held := 0
	if q.MaxInstancesHeld > 0 {
		held = ix.Held(team, q.InstanceType, start, end)
	}
	return CheckQuota(q, count, start, end, now, held)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
