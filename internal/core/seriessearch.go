package core

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// SeriesSearchRequest asks for series offerings: Count instances of Type
// at every occurrence of Schedule, in Zone (every zone of the type when
// empty). Quota, when set, is the buying team's effective quota of the
// type, which each occurrence must pass as a block purchase would.
type SeriesSearchRequest struct {
	Type     string
	Count    int
	Zone     string
	Schedule Schedule
	Quota    *Quota
}

// SearchSeries quotes the series in each zone that holds the type,
// unsigned, best first: the most occurrences that fit, then the lowest
// fee, then by zone. Each occurrence is priced as a block offering of its
// window would be, and marked as not fitting, with the reason, when it
// starts too soon or beyond the booking horizon (the fleet's lead-time
// limits), lasts outside the fleet's durations, does not start on the
// hour in UTC, is beyond the team's quota or finds no capacity.
func (ix *Index) SearchSeries(req SeriesSearchRequest, now time.Time) ([]SeriesOffering, error) {
	// 1. Validate the request and expand the schedule.
	t, ok := ix.Fleet.Type(req.Type)
	if !ok {
		return nil, Invalidf("unknown instance type %q (GET /v1/instance-types lists them)", req.Type)
	}
	l := ix.Fleet.Limits
	if req.Count < 1 || req.Count > l.MaxInstancesPerBlock {
		return nil, Invalidf("instance count %d is out of range: 1 to %d per block", req.Count, l.MaxInstancesPerBlock)
	}
	windows, err := req.Schedule.Windows()
	if err != nil {
		return nil, err
	}
	zones := ix.Fleet.Zones(t.GPUModel)
	if req.Zone != "" {
		if !containsString(zones, req.Zone) {
			return nil, Invalidf("zone %q has no %s capacity; zones: %v", req.Zone, t.Name, zones)
		}
		zones = []string{req.Zone}
	}
	// 2. Quote every occurrence in every zone.
	var out []SeriesOffering
	for _, zone := range zones {
		o := SeriesOffering{InstanceType: t.Name, Count: req.Count, Zone: zone, Schedule: req.Schedule,
			ExpiresAt: now.Add(l.OfferingTTL)}
		for _, w := range windows {
			o.Occurrences = append(o.Occurrences, ix.quoteOccurrence(req, t, zone, w, now))
		}
		out = append(out, o)
	}
	// 3. Rank.
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if na, nb := len(a.Bought()), len(b.Bought()); na != nb {
			return na > nb
		}
		if fa, fb := a.Fee().Minor, b.Fee().Minor; fa != fb {
			return fa < fb
		}
		return a.Zone < b.Zone
	})
	return out, nil
}

// quoteOccurrence prices one occurrence in zone, or says why it does not fit.
func (ix *Index) quoteOccurrence(req SeriesSearchRequest, t InstanceType, zone string, w Window, now time.Time) SeriesOccurrence {
	l := ix.Fleet.Limits
	oc := SeriesOccurrence{Start: w.Start, End: w.End}
	d := w.End.Sub(w.Start)
	switch {
	case !w.Start.After(now):
		oc.Reason = "it has started"
		return oc
	case w.Start.Before(now.Add(l.MinLeadTime)):
		oc.Reason = fmt.Sprintf("it starts sooner than the minimum lead time of %s", l.MinLeadTime)
		return oc
	case w.Start.After(now.Add(l.MaxLeadTime)):
		oc.Reason = fmt.Sprintf("it starts beyond the booking horizon: blocks start at most %s ahead (by %s)",
			fmtHours(l.MaxLeadTime), now.Add(l.MaxLeadTime).UTC().Format(time.RFC3339))
		return oc
	case !onTheHour(w.Start) || !onTheHour(w.End):
		oc.Reason = fmt.Sprintf("it runs %s to %s UTC, not on whole hours", w.Start.Format("15:04"), w.End.Format("15:04"))
		return oc
	case d < l.MinDuration || d > l.MaxDuration:
		oc.Reason = fmt.Sprintf("it lasts %s, outside %s to %s", d, fmtHours(l.MinDuration), fmtHours(l.MaxDuration))
		return oc
	}
	sr := SearchRequest{Types: []string{t.Name}, Count: req.Count, Duration: d, StartAfter: w.Start, EndBefore: w.End,
		Zone: zone, MaxResults: 1}
	if req.Quota != nil {
		sr.Quotas = map[string]Quota{t.Name: *req.Quota}
	}
	offers, err := ix.Search(sr, now)
	if err != nil {
		oc.Reason = reasonOf(err)
		return oc
	}
	for _, off := range offers {
		if !off.Alternative && off.Start.Equal(w.Start) && off.End.Equal(w.End) {
			oc.Fits, oc.Fee, oc.OnDemandFee = true, off.Fee, off.OnDemandFee
			return oc
		}
	}
	oc.Reason = fmt.Sprintf("no capacity: fewer than %d free in %s", req.Count, zone)
	return oc
}

// reasonOf is a refusal's message for a reason field.
func reasonOf(err error) string {
	if errors.Is(err, ErrQuotaExceeded) || errors.Is(err, ErrInvalidArgument) {
		return err.Error()
	}
	return "no capacity: " + err.Error()
}
