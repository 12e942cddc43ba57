package store

import (
	"time"

	"capblock/internal/core"
)

// SimClockNanos is the stored form of a simulated clock's time: unix
// nanoseconds, which hold the years 1678 to 2262; later or earlier times
// are an invalid argument.
func SimClockNanos(t time.Time) (int64, error) {
	if y := t.UTC().Year(); y < 1678 || y > 2261 {
		return 0, core.Invalidf("simulated time %s is outside the years 1678 to 2261", t.UTC().Format(time.RFC3339Nano))
	}
	return t.UnixNano(), nil
}

// SimClockTime reads what SimClockNanos stored.
func SimClockTime(nanos int64) time.Time { return time.Unix(0, nanos).UTC() }
