package core

import (
	"math/bits"
	"sort"
	"time"
)

// MaxCalendarHours bounds one fleet calendar: ten weeks, the booking
// horizon's eight with room to spare.
const MaxCalendarHours = 10 * 7 * 24

// PoolCalendar is one pool's calendar (the nodes of one GPU model in one
// zone), hour by hour from the calendar's start: the GPUs free to book,
// those the caller's team holds and those other teams hold, by count
// only; the team's own live blocks; the unhealthy nodes.
type PoolCalendar struct {
	GPUModel  string
	Zone      string
	Nodes     int
	GPUs      int
	Free      []int32
	Own       []int32
	Taken     []int32
	Blocks    []Block
	Unhealthy []Node
}

// FleetCalendar returns per GPU model and zone the hours [from, from+hours)
// seen by team: what is free, what the team holds (its blocks in full),
// and what other teams hold as a count of GPUs per hour, never who they
// are or which blocks. team "" (an administrator) holds every block.
//
// It reads the pools' hour-by-hour summaries, walks the live blocks once
// and the allocations of unhealthy nodes only, so its cost follows the
// pools, the blocks and the hours, not the nodes times the hours.
func (ix *Index) FleetCalendar(team string, from time.Time, hours int) ([]PoolCalendar, error) {
	if hours < 1 || hours > MaxCalendarHours {
		return nil, Invalidf("a calendar spans 1 to %d hours, not %d", MaxCalendarHours, hours)
	}
	from = from.UTC().Truncate(time.Hour)
	first := int(from.Sub(ix.Origin) / time.Hour) // may be negative: the past
	// 1. Per pool of one model and zone, GPUs booked and GPUs lost to
	//    unhealthy nodes, hour by hour.
	at := map[[2]string]int{}
	var out []PoolCalendar
	for _, p := range ix.pools {
		key := [2]string{p.model, p.zone}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, PoolCalendar{GPUModel: p.model, Zone: p.zone,
				Free: make([]int32, hours), Own: make([]int32, hours), Taken: make([]int32, hours)})
		}
		c := &out[i]
		c.Nodes += len(p.nodes)
		c.GPUs += len(p.nodes) * p.gpus
		for k := range hours {
			if h := first + k; h >= 0 {
				c.Taken[k] += p.usedAt(h) // all holders for now; own subtracted below
			}
		}
		for _, ni := range p.nodes {
			if ix.nodes[ni].node.Health == Unhealthy {
				c.Unhealthy = append(c.Unhealthy, ix.nodes[ni].node)
				ix.subtractUnhealthy(c.Free, ni, first)
			}
		}
	}
	// 2. The team's blocks: listed in full, their GPUs counted as own.
	to := from.Add(time.Duration(hours) * time.Hour)
	for _, b := range ix.blocks {
		if (team != "" && b.Team != team) || !b.End.After(from) || !b.Start.Before(to) {
			continue
		}
		i, ok := at[[2]string{b.GPUModel, b.Zone}]
		if !ok {
			continue
		}
		c := &out[i]
		c.Blocks = append(c.Blocks, *b)
		gpus := int32(0)
		for _, pl := range b.Placements {
			gpus += int32(len(pl.GPUs))
		}
		s := max(0, int(b.Start.Sub(from)/time.Hour))
		e := min(hours, int((b.End.Sub(from)+time.Hour-1)/time.Hour))
		for k := s; k < e; k++ {
			c.Own[k] += gpus
		}
	}
	// 3. Free is what is neither booked nor on an unhealthy node; taken is
	//    what is booked by others.
	for i := range out {
		c := &out[i]
		for k := range hours {
			if first+k < 0 {
				c.Free[k], c.Taken[k] = 0, 0 // the past has nothing free
				continue
			}
			booked := c.Taken[k]
			c.Taken[k] = max(0, booked-c.Own[k])
			c.Free[k] = max(0, int32(c.GPUs)-booked+c.Free[k])
		}
		sort.Slice(c.Blocks, func(a, b int) bool { return c.Blocks[a].Start.Before(c.Blocks[b].Start) })
		sort.Slice(c.Unhealthy, func(a, b int) bool { return c.Unhealthy[a].Name < c.Unhealthy[b].Name })
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPUModel != out[j].GPUModel {
			return out[i].GPUModel < out[j].GPUModel
		}
		return out[i].Zone < out[j].Zone
	})
	return out, nil
}

// subtractUnhealthy takes from free (a negative offset, added back as
// booked GPUs are subtracted later) the GPUs of unhealthy node ni that no
// block holds at each hour: booked GPUs are already counted as booked.
func (ix *Index) subtractUnhealthy(free []int32, ni, first int) {
	ns := &ix.nodes[ni]
	for k := range free {
		h := first + k
		var used uint64
		for a := range ns.allocs.all() {
			if a.start > h {
				break
			}
			if a.end > h {
				used |= a.mask
			}
		}
		free[k] -= int32(ns.node.GPUs - bits.OnesCount64(used))
	}
}
