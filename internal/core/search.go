package core

import "time"

// SearchRequest asks for offerings. Exactly one of Duration or the
// MinDuration/MaxDuration range is set; Types lists one or more instance
// types; an empty Zone means all zones.
type SearchRequest struct {
	Types       []string
	Count       int
	Duration    time.Duration
	MinDuration time.Duration
	MaxDuration time.Duration
	StartAfter  time.Time
	EndBefore   time.Time
	Zone        string
	MaxResults  int
}
