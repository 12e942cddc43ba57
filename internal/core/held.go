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
	for _, b := range ix.blocks {
		if b.Team != team || (instanceType != "" && b.InstanceType != instanceType) {
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
