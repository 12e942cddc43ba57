package core

import (
	"fmt"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // zones work on machines without a tz database
)

// MaxSeriesOccurrences bounds the occurrences of one series, so that its
// quote stays a short id and its purchase one commit of reasonable size.
const MaxSeriesOccurrences = 200

// Series event types.
const (
	EventSeriesScheduled = "series.scheduled"
	EventSeriesCancelled = "series.cancelled"
)

// Schedule is a recurring window in a time zone's wall time: on each of
// Days from the date From to the date To (both included), from StartLocal
// to EndLocal ("HH:MM"; an end at or before the start ends the next day).
// Occurrences follow the local wall time across daylight-saving changes:
// 09:00 in Europe/Madrid is 08:00 UTC in winter and 07:00 UTC in summer.
type Schedule struct {
	Days       []time.Weekday
	StartLocal string
	EndLocal   string
	TimeZone   string
	From, To   string // dates, "2006-01-02"
}

// Window is one occurrence of a schedule, in UTC.
type Window struct{ Start, End time.Time }

// weekdayNames are the accepted spellings of days, lower case.
var weekdayNames = map[string]time.Weekday{
	"sun": time.Sunday, "sunday": time.Sunday, "mon": time.Monday, "monday": time.Monday,
	"tue": time.Tuesday, "tuesday": time.Tuesday, "wed": time.Wednesday, "wednesday": time.Wednesday,
	"thu": time.Thursday, "thursday": time.Thursday, "fri": time.Friday, "friday": time.Friday,
	"sat": time.Saturday, "saturday": time.Saturday,
}

// ParseDays reads days of the week: names (mon, Tuesday…) and the words
// "weekdays" (Monday to Friday) and "weekend".
func ParseDays(names []string) ([]time.Weekday, error) {
	seen := map[time.Weekday]bool{}
	for _, n := range names {
		switch k := strings.ToLower(strings.TrimSpace(n)); k {
		case "weekdays":
			for d := time.Monday; d <= time.Friday; d++ {
				seen[d] = true
			}
		case "weekend":
			seen[time.Saturday], seen[time.Sunday] = true, true
		default:
			d, ok := weekdayNames[k]
			if !ok {
				return nil, Invalidf("day %q: use mon, tue, wed, thu, fri, sat, sun, weekdays or weekend", n)
			}
			seen[d] = true
		}
	}
	if len(seen) == 0 {
		return nil, Invalidf("name at least one day of the week, e.g. weekdays or mon,wed")
	}
	days := make([]time.Weekday, 0, len(seen))
	for d := range seen {
		days = append(days, d)
	}
	sort.Slice(days, func(i, j int) bool { return days[i] < days[j] })
	return days, nil
}

// DayNames spells days as ParseDays reads them.
func DayNames(days []time.Weekday) []string {
	out := make([]string, len(days))
	for i, d := range days {
		out[i] = strings.ToLower(d.String()[:3])
	}
	return out
}

// parseClock reads "HH:MM" as minutes after midnight.
func parseClock(field, s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, Invalidf("%s %q: want a local time HH:MM, e.g. 09:00", field, s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// Location loads the schedule's time zone.
func (sc Schedule) Location() (*time.Location, error) {
	loc, err := time.LoadLocation(sc.TimeZone)
	if err != nil || sc.TimeZone == "" || sc.TimeZone == "Local" {
		return nil, Invalidf("time zone %q: want an IANA name such as Europe/Madrid or UTC", sc.TimeZone)
	}
	return loc, nil
}

// Windows returns the schedule's occurrences in time order, in UTC. It
// refuses an unknown zone, bad times or dates, an empty range, and more
// than MaxSeriesOccurrences occurrences.
func (sc Schedule) Windows() ([]Window, error) {
	loc, err := sc.Location()
	if err != nil {
		return nil, err
	}
	start, err := parseClock("startTime", sc.StartLocal)
	if err != nil {
		return nil, err
	}
	end, err := parseClock("endTime", sc.EndLocal)
	if err != nil {
		return nil, err
	}
	from, err := time.Parse(time.DateOnly, sc.From)
	if err != nil {
		return nil, Invalidf("fromDate %q: want a date YYYY-MM-DD", sc.From)
	}
	to, err := time.Parse(time.DateOnly, sc.To)
	if err != nil {
		return nil, Invalidf("toDate %q: want a date YYYY-MM-DD", sc.To)
	}
	if to.Before(from) {
		return nil, Invalidf("toDate %s is before fromDate %s", sc.To, sc.From)
	}
	if len(sc.Days) == 0 {
		return nil, Invalidf("name at least one day of the week, e.g. weekdays or mon,wed")
	}
	on := map[time.Weekday]bool{}
	for _, d := range sc.Days {
		on[d] = true
	}
	var out []Window
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		if !on[d.Weekday()] {
			continue
		}
		if len(out) == MaxSeriesOccurrences {
			return nil, Invalidf("the series has more than %d occurrences: shorten the range or name fewer days", MaxSeriesOccurrences)
		}
		y, m, day := d.Date()
		ws := time.Date(y, m, day, start/60, start%60, 0, 0, loc)
		endDay := day
		if end <= start {
			endDay++ // an overnight window ends the next day
		}
		we := time.Date(y, m, endDay, end/60, end%60, 0, 0, loc)
		out = append(out, Window{Start: ws.UTC(), End: we.UTC()})
	}
	if len(out) == 0 {
		return nil, Invalidf("no day from %s to %s is one of %s", sc.From, sc.To, strings.Join(DayNames(sc.Days), ","))
	}
	return out, nil
}

// Series is a recurring reservation bought at once: each occurrence of
// its schedule that was bought is a block of Count instances of
// InstanceType in Zone.
type Series struct {
	ID           string
	Name         string
	Team         string
	InstanceType string
	Count        int
	Zone         string
	Schedule     Schedule
	Fee          Money // the fee of every occurrence bought, as charged
	CreatedAt    time.Time
	// Occurrences are the series' blocks ordered by start, when read.
	Occurrences []Block
}

// SeriesState is a series' state, derived from its occurrences' states.
type SeriesState string

const (
	SeriesScheduled SeriesState = "scheduled" // an occurrence is still to come
	SeriesActive    SeriesState = "active"    // an occurrence is active now
	SeriesCancelled SeriesState = "cancelled" // every occurrence was cancelled
	SeriesEnded     SeriesState = "ended"     // none is live and some ran
)

// SeriesStateOf derives a series' state from its occurrences.
func SeriesStateOf(occ []Block) SeriesState {
	live, cancelled := false, 0
	for _, b := range occ {
		switch {
		case b.State == StateActive:
			return SeriesActive
		case b.State.Live():
			live = true
		case b.State == StateCancelled:
			cancelled++
		}
	}
	switch {
	case live:
		return SeriesScheduled
	case cancelled == len(occ):
		return SeriesCancelled
	}
	return SeriesEnded
}

// SeriesOccurrenceName names an occurrence block after its series.
func SeriesOccurrenceName(series string, i, n int) string {
	if series == "" {
		return fmt.Sprintf("occurrence %d of %d", i+1, n)
	}
	return fmt.Sprintf("%s (%d of %d)", series, i+1, n)
}
