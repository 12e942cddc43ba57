package api

import (
	"fmt"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// parseTime parses an RFC 3339 time that huma has already validated
// (format:"date-time"); it is the zero time when s is empty or invalid, in
// which case huma has reported the parameter.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// checkRange reports at loc when end is not after start. A missing or
// malformed time is huma's to report, so it is skipped here.
func checkRange(loc, endName, start, end, startName string) []error {
	from, to := parseTime(start), parseTime(end)
	if from.IsZero() || to.IsZero() || to.After(from) {
		return nil
	}
	return []error{&huma.ErrorDetail{
		Location: loc,
		Message:  fmt.Sprintf("%s must be after %s", endName, startName),
		Value:    end,
	}}
}

// parseDuration parses a Go duration ("90m", "6h") within [min, max]; max
// 0 means unbounded.
func parseDuration(loc, s string, min, max time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, &huma.ErrorDetail{Location: loc, Message: "expected a duration such as 30s, 90m or 6h", Value: s}
	case d < min:
		return 0, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a duration >= %s", min), Value: s}
	case max > 0 && d > max:
		return 0, &huma.ErrorDetail{Location: loc, Message: fmt.Sprintf("expected a duration <= %s", max), Value: s}
	}
	return d, nil
}

// hours converts an hour count. Hour parameters are bounded at 1,000,000 in
// their schemas so that this cannot overflow; the real limits are the
// service's.
func hours(n int) time.Duration { return time.Duration(n) * time.Hour }
