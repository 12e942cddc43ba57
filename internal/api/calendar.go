package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/core"
)

// registerCalendars declares the calendars the console draws: the price
// of every start of a block, the fleet's free GPUs hour by hour, and the
// refund a cancellation would give now.
func (s *server) registerCalendars(api huma.API) {
	huma.Register(api, s.operation("getPriceCalendar", http.MethodGet, "/v1/offerings/price-calendar", "blocks",
		"The fee of every hourly start of a block in a window, and whether it is free"), s.priceCalendar)
	huma.Register(api, s.operation("getFleetCalendar", http.MethodGet, "/v1/fleet-calendar", "fleet",
		"Per GPU model and zone, free GPUs per hour, the team's blocks and other teams' as counts"), s.fleetCalendar)
	huma.Register(api, s.operation("getCancelQuote", http.MethodGet, "/v1/blocks/{id}/cancel-quote", "blocks",
		"The refund that cancelling the block now would give; cancels nothing"), s.cancelQuote)
}

type priceCalendarInput struct {
	InstanceType  string `query:"instanceType" required:"true" minLength:"1" example:"h100.8x"`
	InstanceCount int    `query:"instanceCount" required:"true" minimum:"1" maximum:"1000000"`
	DurationHours int    `query:"durationHours" required:"true" minimum:"1" maximum:"1000000"`
	StartAfter    string `query:"startAfter" required:"true" format:"date-time" doc:"Earliest start (RFC 3339)."`
	EndBefore     string `query:"endBefore" required:"true" format:"date-time" doc:"Latest end (RFC 3339)."`
	Zone          string `query:"zone" doc:"One zone; the best zone of each start when empty."`
	Team          string `query:"team" maxLength:"64" doc:"An admin pricing for another team names it here (its id): that team's quota bounds the starts."`
}

// Resolve checks the window.
func (in *priceCalendarInput) Resolve(huma.Context) []error {
	return checkRange("query.endBefore", "endBefore", in.StartAfter, in.EndBefore, "startAfter")
}

type priceStartJSON struct {
	Start       time.Time `json:"start"`
	Zone        string    `json:"zone" doc:"The zone quoted: the cheapest with room, or the cheapest when none has room."`
	Fee         moneyJSON `json:"fee"`
	OnDemandFee moneyJSON `json:"onDemandFee"`
	Available   bool      `json:"available"`
}

type priceCalendarJSON struct {
	Starts []priceStartJSON `json:"starts" doc:"Every hourly start whose block ends within the window, earliest first."`
}

func (s *server) priceCalendar(ctx context.Context, in *priceCalendarInput) (*out[priceCalendarJSON], error) {
	team := s.teamFor(ctx, in.Team)
	starts, err := s.svc.PriceCalendar(ctx, core.SearchRequest{
		Types:      []string{in.InstanceType},
		Count:      in.InstanceCount,
		Duration:   hours(in.DurationHours),
		StartAfter: parseTime(in.StartAfter),
		EndBefore:  parseTime(in.EndBefore),
		Zone:       in.Zone,
		Team:       team,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := priceCalendarJSON{Starts: make([]priceStartJSON, 0, len(starts))}
	for _, st := range starts {
		resp.Starts = append(resp.Starts, priceStartJSON{Start: st.Start.UTC(), Zone: st.Zone,
			Fee: toMoney(st.Fee), OnDemandFee: toMoney(st.OnDemandFee), Available: st.Available})
	}
	return reply(resp)
}

type fleetCalendarInput struct {
	From  string `query:"from" format:"date-time" doc:"Start of the first hour (RFC 3339); the current hour when empty."`
	Hours int    `query:"hours" minimum:"1" maximum:"1680" default:"1344" doc:"Hours from from; 8 weeks by default."`
}

type calendarBlockJSON struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Team          string    `json:"team"`
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	GPUs          int       `json:"gpus"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	State         string    `json:"state"`
}

type calendarNodeJSON struct {
	Name string `json:"name"`
	Rack string `json:"rack"`
	GPUs int    `json:"gpus"`
}

type poolCalendarJSON struct {
	GPUModel  string              `json:"gpuModel"`
	Zone      string              `json:"zone"`
	Nodes     int                 `json:"nodes"`
	GPUs      int                 `json:"gpus"`
	Free      []int32             `json:"free" doc:"GPUs free to book, per hour."`
	Own       []int32             `json:"own" doc:"GPUs the caller's team holds, per hour (every team's, for an admin)."`
	Taken     []int32             `json:"taken" doc:"GPUs other teams hold, per hour: a count, never who."`
	Blocks    []calendarBlockJSON `json:"blocks" doc:"The caller's team's live blocks in the range (every team's, for an admin)."`
	Unhealthy []calendarNodeJSON  `json:"unhealthy" doc:"Nodes failed now."`
}

type fleetCalendarJSON struct {
	From  time.Time          `json:"from"`
	Hours int                `json:"hours"`
	Pools []poolCalendarJSON `json:"pools"`
}

func (s *server) fleetCalendar(ctx context.Context, in *fleetCalendarInput) (*out[fleetCalendarJSON], error) {
	from := parseTime(in.From)
	if from.IsZero() {
		from = s.svc.Now()
	}
	from = from.UTC().Truncate(time.Hour)
	pools, err := s.svc.FleetCalendar(ctx, scopeOf(ctx), from, in.Hours)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := fleetCalendarJSON{From: from, Hours: in.Hours, Pools: make([]poolCalendarJSON, 0, len(pools))}
	for _, p := range pools {
		pj := poolCalendarJSON{GPUModel: p.GPUModel, Zone: p.Zone, Nodes: p.Nodes, GPUs: p.GPUs,
			Free: p.Free, Own: p.Own, Taken: p.Taken,
			Blocks: make([]calendarBlockJSON, 0, len(p.Blocks)), Unhealthy: make([]calendarNodeJSON, 0, len(p.Unhealthy))}
		for _, b := range p.Blocks {
			gpus := 0
			for _, pl := range b.Placements {
				gpus += len(pl.GPUs)
			}
			pj.Blocks = append(pj.Blocks, calendarBlockJSON{ID: b.ID, Name: b.Name, Team: b.Team, InstanceType: b.InstanceType,
				InstanceCount: b.Count, GPUs: gpus, StartTime: b.Start.UTC(), EndTime: b.End.UTC(), State: string(b.State)})
		}
		for _, n := range p.Unhealthy {
			pj.Unhealthy = append(pj.Unhealthy, calendarNodeJSON{Name: n.Name, Rack: n.Rack, GPUs: n.GPUs})
		}
		resp.Pools = append(resp.Pools, pj)
	}
	return reply(resp)
}

type cancelQuoteJSON struct {
	Refund moneyJSON `json:"refund" doc:"What POST /v1/blocks/{id}/cancel would refund now, per the operator's policy."`
}

func (s *server) cancelQuote(ctx context.Context, in *blockIDInput) (*out[cancelQuoteJSON], error) {
	refund, err := s.svc.CancelQuote(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(cancelQuoteJSON{Refund: toMoney(refund)})
}
