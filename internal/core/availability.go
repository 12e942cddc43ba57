package core

import (
	"math/bits"
	"time"
)

// MaxAvailabilityHours bounds one availability query (a calendar month).
const MaxAvailabilityHours = 31 * 24

// Slot is the number of free instances in the hour starting at Start.
type Slot struct {
	Start time.Time
	Free  int
}

// Availability returns, per hour of [from, to), how many instances of t are
// free in zone (all zones summed when empty).
func (ix *Index) Availability(t InstanceType, zone string, from, to time.Time) ([]Slot, error) {
	from, to = from.UTC().Truncate(time.Hour), to.UTC()
	n := int(to.Sub(from) / time.Hour)
	if to.Sub(from)%time.Hour != 0 {
		n++
	}
	if n < 1 {
		return nil, Invalidf("the range %s to %s is empty", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if n > MaxAvailabilityHours {
		return nil, Invalidf("the range spans %d hours, at most %d per request", n, MaxAvailabilityHours)
	}
	slots := make([]Slot, n)
	for i := range slots {
		slots[i].Start = from.Add(time.Duration(i) * time.Hour)
	}
	for _, p := range ix.poolsFor(t, zone) {
		for i := range slots {
			if slots[i].Start.Before(ix.Origin) {
				continue // the past has nothing free
			}
			h := ix.hourOf(slots[i].Start)
			if t.GPUsPerInstance == p.gpus {
				slots[i].Free += len(p.nodes) - int(p.busyAt(h))
				continue
			}
			for _, ni := range p.nodes {
				slots[i].Free += bits.OnesCount64(ix.freeMask(ni, h, h+1, nil)) / t.GPUsPerInstance
			}
		}
	}
	return slots, nil
}
