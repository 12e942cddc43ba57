package humantime

import (
	"testing"
	"time"
)

// FuzzParseDuration: no input panics; a duration accepted is not negative.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"48h", "3d", "2w", "90m", "1d12h", "1.5h", "-1h", "9999999999w", "", "h", "1dd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %s, negative", s, d)
		}
	})
}

// FuzzParseTime: no input panics; a time accepted is in UTC.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"now", "today", "tomorrow", "+14d", "-2h", "2026-12-01", "2026-12-01T10:00", "2026-12-01T10:00:00Z", "+9999999999w", "2026-13-01"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 29, 15, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, now)
		if err == nil && got.Location() != time.UTC {
			t.Fatalf("ParseTime(%q) = %s, not UTC", s, got)
		}
	})
}
