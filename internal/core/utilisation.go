package core

import "time"

// RunSpan is one run of a job's instances on a block: GPUs in use from
// Start to End (zero while it runs).
type RunSpan struct {
	JobID   string
	BlockID string
	GPUs    int
	Start   time.Time
	End     time.Time
	// Lent: the GPUs ran backfill for others (the block lent them).
	Lent bool
}

// Utilisation is what became of reserved GPU time: Reserved is what a
// block held over the hours elapsed, Used what its holder's jobs ran on,
// Lent what ran as backfill for others on GPUs the holder lent, Idle the
// rest. Figures are GPU-seconds, so that sums
// are exact; Hours converts.
type Utilisation struct {
	Reserved, Used, Lent, Idle int64
}

// Add sums two utilisations.
func (u Utilisation) Add(v Utilisation) Utilisation {
	return Utilisation{u.Reserved + v.Reserved, u.Used + v.Used, u.Lent + v.Lent, u.Idle + v.Idle}
}

// Hours converts GPU-seconds to GPU-hours.
func Hours(gpuSeconds int64) float64 { return float64(gpuSeconds) / 3600 }

// BlockUtilisation is the utilisation of a block over [from, to) (a zero
// bound does not clip), clipped to its window and to now: hours not yet
// elapsed count for nothing. Only blocks that held their GPUs count,
// active or expired ones (a block handed on ends where its holder's hours
// end); a cancelled block gave its hours back. runs are the runs of the
// holder's jobs; those on other blocks are skipped. Use never exceeds
// the reservation: runs that overlap (they should not) are capped.
func BlockUtilisation(b Block, runs []RunSpan, from, to, now time.Time) Utilisation {
	if b.State != StateActive && b.State != StateExpired {
		return Utilisation{}
	}
	s, e := b.Start, earlier(b.End, now)
	if !from.IsZero() {
		s = later(s, from)
	}
	if !to.IsZero() {
		e = earlier(e, to)
	}
	if !e.After(s) {
		return Utilisation{}
	}
	u := Utilisation{Reserved: int64(b.GPUs()) * int64(e.Sub(s)/time.Second)}
	for _, r := range runs {
		if r.BlockID != b.ID {
			continue
		}
		re := r.End
		if re.IsZero() {
			re = now
		}
		if rs, rend := later(r.Start, s), earlier(re, e); rend.After(rs) {
			if r.Lent {
				u.Lent += int64(r.GPUs) * int64(rend.Sub(rs)/time.Second)
			} else {
				u.Used += int64(r.GPUs) * int64(rend.Sub(rs)/time.Second)
			}
		}
	}
	u.Used = min(u.Used, u.Reserved)
	u.Lent = min(u.Lent, u.Reserved-u.Used)
	u.Idle = u.Reserved - u.Used - u.Lent
	return u
}
