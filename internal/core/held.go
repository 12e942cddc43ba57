package core

import "time"

// holdings counts, hour by hour from the index's origin, the instances a
// team holds in live blocks: in all, and per instance type. Hours are the
// index's own (a partial hour counts whole), so Held costs the hours of
// its window, however many blocks the team has.
type holdings struct {
	all    []int32
	byType map[string][]int32
}

// hold adds delta instances of b to its team's counts over b's hours.
func (ix *Index) hold(b *Block, delta int) {
	s, e := ix.hourOf(b.Start), ix.hourOf(b.End)
	if e <= s {
		return
	}
	h := ix.held[b.Team]
	if h == nil {
		h = &holdings{byType: map[string][]int32{}}
		ix.held[b.Team] = h
	}
	add := func(counts []int32) []int32 {
		for len(counts) < e {
			counts = append(counts, 0)
		}
		for i := s; i < e; i++ {
			counts[i] += int32(delta)
		}
		return counts
	}
	h.all = add(h.all)
	h.byType[b.InstanceType] = add(h.byType[b.InstanceType])
}

// Held returns the most instances the team holds at once in [start, end)
// in live blocks (of instanceType only, when not empty), counted by the
// index's hours.
func (ix *Index) Held(team, instanceType string, start, end time.Time) int {
	h := ix.held[team]
	if h == nil {
		return 0
	}
	counts := h.all
	if instanceType != "" {
		counts = h.byType[instanceType]
	}
	s := 0 // the hour that start falls in
	if start.After(ix.Origin) {
		s = int(start.Sub(ix.Origin) / time.Hour)
	}
	e := min(ix.hourOf(end), len(counts))
	most := int32(0)
	for i := s; i < e; i++ {
		most = max(most, counts[i])
	}
	return int(most)
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
