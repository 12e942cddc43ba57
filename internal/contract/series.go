package contract

import (
	"time"

	"capblock/internal/core"
)

// SeriesSearchRequest asks for series offerings (POST
// /v1/series-offerings in the REST API): Count instances of InstanceType
// on Days (names, or "weekdays"/"weekend") from StartTime to EndTime
// ("HH:MM" wall time in TimeZone), from FromDate to ToDate (dates,
// included) or for Weeks weeks from FromDate. Partial offers the
// occurrences that fit when some do not; otherwise a series is bought
// whole or not at all. Team is the team that would buy (its quota).
type SeriesSearchRequest struct {
	Team         string
	InstanceType string
	Count        int
	Zone         string
	Days         []string
	StartTime    string
	EndTime      string
	TimeZone     string
	FromDate     string
	ToDate       string
	Weeks        int
	Partial      bool
}

// SeriesPurchaseRequest buys a series offering (POST /v1/series).
type SeriesPurchaseRequest struct {
	Team        string
	OfferingID  string
	ClientToken string
	Name        string
}

// SeriesView is a series with its state derived from its occurrences.
type SeriesView struct {
	Series core.Series
	State  core.SeriesState
}

// OrderRequest places a standing order (POST /v1/orders): a block of
// Count instances of InstanceType for Duration, starting at or after
// StartAfter and ending by EndBefore, notified (Mode notify) or bought
// within MaxFee (Mode buy) once it fits, until Deadline (zero: the
// latest start that still ends by EndBefore).
type OrderRequest struct {
	Team         string
	Name         string
	Mode         core.OrderMode
	InstanceType string
	Count        int
	Zone         string
	Duration     time.Duration
	StartAfter   time.Time
	EndBefore    time.Time
	Deadline     time.Time
	MaxFee       core.Money
}
