// Package humantime parses the durations and dates that people type on a
// command line or in a config file: "48h", "3d", "2w", "1d12h", "tomorrow",
// "+14d", "2026-12-01". Every function is pure: "now" is an argument, so the
// same input always gives the same answer. Results are never rounded;
// granularity (such as whole hours) is the caller's business.
package humantime

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day and Week are the calendar-free units that ParseDuration accepts as
// "d" and "w": always exactly 24 and 168 hours (no time zones, no DST).
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

var units = map[string]time.Duration{
	"w": Week,
	"d": Day,
	"h": time.Hour,
	"m": time.Minute,
	"s": time.Second,
}

// ErrSyntax matches (errors.Is) every error of this package.
var ErrSyntax = errors.New("invalid time syntax")

// syntaxError is a message for the user that matches ErrSyntax.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string        { return e.msg }
func (e *syntaxError) Is(target error) bool { return target == ErrSyntax }

func syntaxf(format string, args ...any) error {
	return &syntaxError{fmt.Sprintf(format, args...)}
}

// ParseDuration parses a non-negative duration written as a sequence of
// whole numbers each followed by a unit: w (weeks), d (days), h, m, s.
// Examples: "48h", "3d", "2w", "90m", "1d12h", "1w2d". Go durations such as
// "1.5h" or "1h30m0s" are accepted too.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, syntaxf("empty duration; write it like 48h, 3d, 2w or 1d12h")
	}
	if d, ok := parseUnits(s); ok {
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, syntaxf("%q is not a duration; write it like 48h, 3d, 2w, 90m or 1d12h", s)
	}
	if d < 0 {
		return 0, syntaxf("duration %q is negative", s)
	}
	return d, nil
}

// parseUnits parses "1d12h"-style input; ok is false when s is not of that
// form (it may still be a Go duration) or overflows.
func parseUnits(s string) (d time.Duration, ok bool) {
	seen := map[string]bool{}
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, false
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		unit, found := units[s[i:i+1]]
		if !found || seen[s[i:i+1]] {
			return 0, false
		}
		// "ms", "us" and "ns" belong to Go's syntax.
		if s[i] == 'm' && i+1 < len(s) && s[i+1] == 's' {
			return 0, false
		}
		seen[s[i:i+1]] = true
		if n > int64(math.MaxInt64/unit) || d > math.MaxInt64-time.Duration(n)*unit {
			return 0, false
		}
		d += time.Duration(n) * unit
		s = s[i+1:]
	}
	return d, true
}

// dateLayouts are the absolute forms ParseTime accepts, most specific
// first. Layouts without a zone are read as UTC.
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04",
	"2006-01-02 15:04",
	"2006-01-02",
}

// ParseTime parses a point in time relative to now:
//
//	now                 now itself
//	today, tomorrow     midnight UTC at the start of that day
//	yesterday
//	+14d, +6h, +1d12h   now plus a duration (ParseDuration's syntax)
//	-2h                 now minus a duration
//	2026-12-01          midnight UTC of that date
//	2026-12-01T10:00    that minute in UTC (also with a space for the T)
//	RFC 3339            e.g. 2026-12-01T10:00:00+02:00
//
// The result is in UTC.
func ParseTime(s string, now time.Time) (time.Time, error) {
	now = now.UTC()
	midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch strings.ToLower(s) {
	case "":
		return time.Time{}, syntaxf("empty date; write now, today, tomorrow, +14d, 2026-12-01 or an RFC 3339 time")
	case "now":
		return now, nil
	case "today":
		return midnight, nil
	case "tomorrow":
		return midnight.AddDate(0, 0, 1), nil
	case "yesterday":
		return midnight.AddDate(0, 0, -1), nil
	}
	if s[0] == '+' || s[0] == '-' {
		d, err := ParseDuration(s[1:])
		if err != nil {
			return time.Time{}, syntaxf("%q is not a relative date; write it like +14d, +6h or +1d12h", s)
		}
		if s[0] == '-' {
			d = -d
		}
		return now.Add(d), nil
	}
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, syntaxf("%q is not a date; write now, today, tomorrow, +14d, +6h, 2026-12-01 or an RFC 3339 time like 2026-12-01T10:00:00Z", s)
}

// FormatDuration writes d in the largest units that ParseDuration reads
// back exactly, e.g. 36h → "1d12h", 2w → "2w", 90m → "1h30m".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < 0 || d%time.Second != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		name string
		unit time.Duration
	}{{"w", Week}, {"d", Day}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.unit
		}
	}
	return b.String()
}
