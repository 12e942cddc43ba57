package store

import (
	"fmt"
	"math"

	"capblock/internal/core"
)

// CheckUIDRange refuses a range of job uids that TeamUID cannot allocate
// from: an empty one, or one reaching root (0) or above 2^31-1.
func CheckUIDRange(lo, hi int) error {
	switch {
	case lo > hi:
		return core.Invalidf("the job uid range %d-%d is empty", lo, hi)
	case lo < 1:
		return core.Invalidf("the job uid range %d-%d holds uids below 1: a team's jobs never run as root", lo, hi)
	case hi > math.MaxInt32:
		return core.Invalidf("the job uid range %d-%d goes above %d", lo, hi, math.MaxInt32)
	}
	return nil
}

// UIDRangeFull is TeamUID's error when every uid of [lo, hi] is held by
// another team.
func UIDRangeFull(team string, lo, hi int) error {
	return fmt.Errorf("allocating a job uid for team %s: %w: the range %d-%d is full, every uid is held by another team; widen --job-uid-range",
		team, core.ErrNoCapacity, lo, hi)
}
