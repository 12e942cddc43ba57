package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerSeries declares "Recurring blocks": search, purchase, reads and
// cancel of series.
func (s *server) registerSeries(api huma.API) {
	search := s.operation("searchSeriesOfferings", http.MethodPost, "/v1/series-offerings", "series",
		"Quote a recurring window (days of the week, local times in a time zone, a date range): every occurrence, whether it fits, its fee")
	search.Description = "A search, not a purchase: it stores nothing. An offering has an offeringId only when it can be bought: " +
		"every occurrence fits, or, with partial, those that fit."
	huma.Register(api, search, s.searchSeriesOfferings)

	registerPurchase(api, s.operation("purchaseSeries", http.MethodPost, "/v1/series", "series",
		"Buy a series offering: every occurrence it quotes becomes a block, in one commit; the same clientToken again returns the same series"), "series", s.purchaseSeries)
	huma.Register(api, s.operation("listSeries", http.MethodGet, "/v1/series", "series",
		"List the team's series"), s.listSeries)
	huma.Register(api, s.operation("getSeries", http.MethodGet, "/v1/series/{id}", "series",
		"Get a series with its occurrences"), s.getSeries)
	huma.Register(api, s.operation("cancelSeries", http.MethodPost, "/v1/series/{id}/cancel", "series",
		"Cancel every occurrence not yet ended, each refunded per the operator's policy (cancel one occurrence as its block)"), s.cancelSeries)
}

type seriesSearchJSON struct {
	InstanceType  string   `json:"instanceType" minLength:"1" maxLength:"64" example:"l4.1x"`
	InstanceCount int      `json:"instanceCount" minimum:"1" maximum:"1000000" example:"4"`
	Zone          string   `json:"zone,omitempty" maxLength:"64" doc:"One zone; every zone of the type when empty."`
	DaysOfWeek    []string `json:"daysOfWeek" minItems:"1" maxItems:"7" example:"[\"weekdays\"]" doc:"mon … sun, weekdays or weekend."`
	StartTime     string   `json:"startTime" minLength:"1" maxLength:"5" example:"09:00" doc:"Local wall time HH:MM in timeZone."`
	EndTime       string   `json:"endTime" minLength:"1" maxLength:"5" example:"17:00" doc:"Local wall time HH:MM; at or before startTime ends the next day."`
	TimeZone      string   `json:"timeZone" minLength:"1" maxLength:"64" example:"Europe/Madrid" doc:"IANA time zone; occurrences follow its daylight-saving changes."`
	FromDate      string   `json:"fromDate" minLength:"1" maxLength:"10" example:"2027-03-22" doc:"First date (YYYY-MM-DD, local)."`
	ToDate        string   `json:"toDate,omitempty" maxLength:"10" doc:"Last date, included; or give weeks."`
	Weeks         int      `json:"weeks,omitempty" minimum:"0" maximum:"60" doc:"Weeks from fromDate, instead of toDate."`
	Partial       bool     `json:"partial,omitempty" doc:"Offer the occurrences that fit when some do not; by default a series is bought whole or not at all."`
}

type searchSeriesInput struct {
	Body seriesSearchJSON
}

func (s *server) searchSeriesOfferings(ctx context.Context, in *searchSeriesInput) (*out[seriesOfferingsJSON], error) {
	b := in.Body
	offers, err := s.svc.SeriesOfferings(ctx, contract.SeriesSearchRequest{
		Team: scopeOf(ctx), InstanceType: b.InstanceType, Count: b.InstanceCount, Zone: b.Zone, Days: b.DaysOfWeek,
		StartTime: b.StartTime, EndTime: b.EndTime, TimeZone: b.TimeZone, FromDate: b.FromDate, ToDate: b.ToDate,
		Weeks: b.Weeks, Partial: b.Partial,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	f, err := s.svc.Fleet(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toSeriesOfferings(offers, f.Currency))
}

type purchaseSeriesInput struct {
	Body struct {
		OfferingID  string `json:"offeringId" minLength:"1" maxLength:"16384" doc:"A series offering id (cso-…) from POST /v1/series-offerings."`
		ClientToken string `json:"clientToken" minLength:"1" maxLength:"64" doc:"Idempotency key: the same token returns the same series."`
		Name        string `json:"name,omitempty" maxLength:"128"`
		Team        string `json:"team,omitempty" maxLength:"64" doc:"An admin buying for another team names it here (its id)."`
	}
}

func (s *server) purchaseSeries(ctx context.Context, in *purchaseSeriesInput) (*purchaseOutput[seriesJSON], error) {
	team := s.teamFor(ctx, in.Body.Team)
	v, created, err := s.svc.PurchaseSeries(ctx, contract.SeriesPurchaseRequest{
		Team: team, OfferingID: in.Body.OfferingID, ClientToken: in.Body.ClientToken, Name: in.Body.Name,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return purchased(toSeries(v), created), nil
}

type listSeriesInput struct {
	State []string `query:"state,explode" enum:"scheduled,active,ended,cancelled" doc:"Only series in these states (repeat the parameter); all when absent."`
	Team  string   `query:"team" maxLength:"64" doc:"Only this team's series (its id). A team outside the caller's scope has none to show: a filter never widens what the caller may see."`
}

func (s *server) listSeries(ctx context.Context, in *listSeriesInput) (*out[seriesListJSON], error) {
	f := listFilter{states: in.State, team: in.Team}
	list, err := s.svc.ListSeries(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := seriesListJSON{Series: make([]seriesJSON, 0, len(list))}
	for _, v := range list {
		if j := toSeries(v); f.keep(j.State, j.Team, nil) {
			resp.Series = append(resp.Series, j)
		}
	}
	return reply(resp)
}

type seriesIDInput struct {
	ID string `path:"id" example:"cs-01HZX" doc:"Series id."`
}

func (s *server) getSeries(ctx context.Context, in *seriesIDInput) (*out[seriesJSON], error) {
	v, err := s.svc.GetSeries(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toSeries(v))
}

func (s *server) cancelSeries(ctx context.Context, in *seriesIDInput) (*out[seriesJSON], error) {
	v, err := s.svc.CancelSeries(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toSeries(v))
}

// Wire shapes of recurring blocks.

type scheduleJSON struct {
	DaysOfWeek []string `json:"daysOfWeek" nullable:"false" example:"[\"mon\",\"tue\"]"`
	StartTime  string   `json:"startTime" example:"09:00"`
	EndTime    string   `json:"endTime" example:"17:00"`
	TimeZone   string   `json:"timeZone" example:"Europe/Madrid"`
	FromDate   string   `json:"fromDate" example:"2027-03-22"`
	ToDate     string   `json:"toDate" example:"2027-04-16"`
}

func toSchedule(sc core.Schedule) scheduleJSON {
	return scheduleJSON{DaysOfWeek: core.DayNames(sc.Days), StartTime: sc.StartLocal, EndTime: sc.EndLocal,
		TimeZone: sc.TimeZone, FromDate: sc.From, ToDate: sc.To}
}

type seriesOccurrenceJSON struct {
	StartTime      time.Time  `json:"startTime" doc:"UTC."`
	EndTime        time.Time  `json:"endTime" doc:"UTC."`
	LocalStartTime string     `json:"localStartTime" example:"2027-03-22T09:00:00+01:00" doc:"The start in the series' time zone."`
	LocalEndTime   string     `json:"localEndTime" example:"2027-03-22T17:00:00+01:00"`
	DurationHours  int        `json:"durationHours" example:"8"`
	Fits           bool       `json:"fits"`
	Reason         string     `json:"reason,omitempty" doc:"Why it does not fit."`
	UpfrontFee     *moneyJSON `json:"upfrontFee,omitempty" doc:"When it fits."`
}

type seriesOfferingJSON struct {
	OfferingID    string                 `json:"offeringId,omitempty" doc:"Absent when nothing can be bought (all-or-nothing with an occurrence that does not fit)."`
	InstanceType  string                 `json:"instanceType" example:"l4.1x"`
	InstanceCount int                    `json:"instanceCount" example:"4"`
	Zone          string                 `json:"zone" example:"zone-a"`
	Schedule      scheduleJSON           `json:"schedule"`
	Occurrences   []seriesOccurrenceJSON `json:"occurrences" nullable:"false" doc:"Every occurrence of the schedule, in time order."`
	Fitting       int                    `json:"fitting" doc:"How many occurrences fit (and are bought)."`
	UpfrontFee    moneyJSON              `json:"upfrontFee" doc:"The fees of the occurrences that fit, summed."`
	OnDemandFee   moneyJSON              `json:"onDemandFee" doc:"What the same instance-hours cost on demand."`
	ExpiresAt     time.Time              `json:"expiresAt"`
}

type seriesOfferingsJSON struct {
	SeriesOfferings []seriesOfferingJSON `json:"seriesOfferings" nullable:"false" doc:"One per zone, best first (most occurrences that fit, lowest fee)."`
}

func localTime(t time.Time, loc *time.Location) string {
	if loc == nil {
		return t.UTC().Format(time.RFC3339)
	}
	return t.In(loc).Format(time.RFC3339)
}

// toSeriesOfferings renders quotes; one where nothing fits costs 0 in
// currency, the fleet's.
func toSeriesOfferings(os []core.SeriesOffering, currency string) seriesOfferingsJSON {
	out := seriesOfferingsJSON{SeriesOfferings: make([]seriesOfferingJSON, 0, len(os))}
	for _, o := range os {
		loc, _ := o.Schedule.Location()
		j := seriesOfferingJSON{OfferingID: o.ID, InstanceType: o.InstanceType, InstanceCount: o.Count, Zone: o.Zone,
			Schedule: toSchedule(o.Schedule), Fitting: len(o.Bought()), UpfrontFee: toMoney(o.Fee()),
			OnDemandFee: toMoney(o.OnDemandFee()), ExpiresAt: o.ExpiresAt.UTC(),
			Occurrences: make([]seriesOccurrenceJSON, 0, len(o.Occurrences))}
		if j.UpfrontFee.Currency == "" {
			j.UpfrontFee.Currency, j.OnDemandFee.Currency = currency, currency
		}
		for _, oc := range o.Occurrences {
			w := seriesOccurrenceJSON{StartTime: oc.Start.UTC(), EndTime: oc.End.UTC(), LocalStartTime: localTime(oc.Start, loc),
				LocalEndTime: localTime(oc.End, loc), DurationHours: oc.DurationHours(), Fits: oc.Fits, Reason: oc.Reason}
			if oc.Fits {
				fee := toMoney(oc.Fee)
				w.UpfrontFee = &fee
			}
			j.Occurrences = append(j.Occurrences, w)
		}
		out.SeriesOfferings = append(out.SeriesOfferings, j)
	}
	return out
}

type seriesBlockJSON struct {
	BlockID        string    `json:"blockId" example:"cb-01HZX"`
	StartTime      time.Time `json:"startTime"`
	EndTime        time.Time `json:"endTime"`
	LocalStartTime string    `json:"localStartTime"`
	LocalEndTime   string    `json:"localEndTime"`
	DurationHours  int       `json:"durationHours"`
	State          string    `json:"state" enum:"payment-pending,scheduled,active,expired,payment-failed,cancelled,failed"`
	UpfrontFee     moneyJSON `json:"upfrontFee"`
}

type seriesJSON struct {
	ID            string            `json:"id" example:"cs-01HZX"`
	Name          string            `json:"name"`
	Team          string            `json:"team"`
	InstanceType  string            `json:"instanceType" example:"l4.1x"`
	InstanceCount int               `json:"instanceCount" example:"4"`
	Zone          string            `json:"zone"`
	Schedule      scheduleJSON      `json:"schedule"`
	State         string            `json:"state" enum:"scheduled,active,ended,cancelled" doc:"Derived from the occurrences."`
	Occurrences   []seriesBlockJSON `json:"occurrences" nullable:"false" doc:"The blocks bought, in time order."`
	UpfrontFee    moneyJSON         `json:"upfrontFee"`
	CreatedAt     time.Time         `json:"createdAt"`
}

type seriesListJSON struct {
	Series []seriesJSON `json:"series" nullable:"false"`
}

func toSeries(v contract.SeriesView) seriesJSON {
	sr := v.Series
	loc, _ := sr.Schedule.Location()
	out := seriesJSON{ID: sr.ID, Name: sr.Name, Team: sr.Team, InstanceType: sr.InstanceType, InstanceCount: sr.Count,
		Zone: sr.Zone, Schedule: toSchedule(sr.Schedule), State: string(v.State), UpfrontFee: toMoney(sr.Fee),
		CreatedAt: sr.CreatedAt.UTC(), Occurrences: make([]seriesBlockJSON, 0, len(sr.Occurrences))}
	for _, b := range sr.Occurrences {
		out.Occurrences = append(out.Occurrences, seriesBlockJSON{BlockID: b.ID, StartTime: b.Start.UTC(), EndTime: b.End.UTC(),
			LocalStartTime: localTime(b.Start, loc), LocalEndTime: localTime(b.End, loc), DurationHours: b.DurationHours(),
			State: string(b.State), UpfrontFee: toMoney(b.Fee)})
	}
	return out
}

// registerOrders declares "Standing orders".
func (s *server) registerOrders(api huma.API) {
	create := s.operation("createOrder", http.MethodPost, "/v1/orders", "orders",
		"Place a standing order: a block request that waits until it fits, then notifies (order.fits) or buys within maxFee")
	create.DefaultStatus = http.StatusCreated
	huma.Register(api, create, s.createOrder)
	huma.Register(api, s.operation("listOrders", http.MethodGet, "/v1/orders", "orders",
		"List the team's standing orders, oldest first"), s.listOrders)
	huma.Register(api, s.operation("getOrder", http.MethodGet, "/v1/orders/{id}", "orders",
		"Get a standing order"), s.getOrder)
	huma.Register(api, s.operation("cancelOrder", http.MethodPost, "/v1/orders/{id}/cancel", "orders",
		"Withdraw an open standing order"), s.cancelOrder)
}

type createOrderInput struct {
	Body struct {
		Name          string     `json:"name,omitempty" maxLength:"128"`
		Mode          string     `json:"mode,omitempty" enum:"notify,buy" default:"notify" doc:"notify: record order.fits with a quote; buy: buy the block within maxFee."`
		InstanceType  string     `json:"instanceType" minLength:"1" maxLength:"64" example:"h100.8x"`
		InstanceCount int        `json:"instanceCount" minimum:"1" maximum:"1000000" example:"4"`
		Zone          string     `json:"zone,omitempty" maxLength:"64"`
		DurationHours int        `json:"durationHours" minimum:"1" maximum:"1000000" example:"8"`
		StartAfter    time.Time  `json:"startAfter" doc:"Earliest start (RFC 3339)."`
		EndBefore     time.Time  `json:"endBefore" doc:"Latest end (RFC 3339)."`
		Deadline      *time.Time `json:"deadline,omitempty" doc:"When the order expires if not served; at most (and by default) the latest start that still ends by endBefore."`
		MaxFee        *moneyJSON `json:"maxFee,omitempty" doc:"The most the block may cost; required with mode buy."`
		Team          string     `json:"team,omitempty" maxLength:"64" doc:"An admin ordering for another team names it here (its id)."`
	}
}

func (s *server) createOrder(ctx context.Context, in *createOrderInput) (*out[orderJSON], error) {
	b := in.Body
	team := s.teamFor(ctx, b.Team)
	req := contract.OrderRequest{Team: team, Name: b.Name, Mode: core.OrderMode(b.Mode), InstanceType: b.InstanceType,
		Count: b.InstanceCount, Zone: b.Zone, Duration: hours(b.DurationHours), StartAfter: b.StartAfter.UTC(), EndBefore: b.EndBefore.UTC()}
	if b.Deadline != nil {
		req.Deadline = b.Deadline.UTC()
	}
	if b.MaxFee != nil {
		var err error
		if req.MaxFee, err = core.ParseMoney(b.MaxFee.Amount, b.MaxFee.Currency); err != nil {
			return nil, serviceProblem(ctx, core.Invalidf("maxFee: %v", err))
		}
	}
	o, err := s.svc.CreateOrder(ctx, req)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toOrder(o))
}

type listOrdersInput struct {
	State []string `query:"state,explode" enum:"open,notified,bought,expired,cancelled" doc:"Only orders in these states (repeat the parameter); all when absent."`
	Team  string   `query:"team" maxLength:"64" doc:"Only this team's orders (its id). A team outside the caller's scope has none to show: a filter never widens what the caller may see."`
}

func (s *server) listOrders(ctx context.Context, in *listOrdersInput) (*out[ordersJSON], error) {
	f := listFilter{states: in.State, team: in.Team}
	orders, err := s.svc.ListOrders(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := ordersJSON{Orders: make([]orderJSON, 0, len(orders))}
	for _, o := range orders {
		if j := toOrder(o); f.keep(j.State, j.Team, nil) {
			resp.Orders = append(resp.Orders, j)
		}
	}
	return reply(resp)
}

type orderIDInput struct {
	ID string `path:"id" example:"ord-01HZX" doc:"Order id."`
}

func (s *server) getOrder(ctx context.Context, in *orderIDInput) (*out[orderJSON], error) {
	o, err := s.svc.GetOrder(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toOrder(o))
}

func (s *server) cancelOrder(ctx context.Context, in *orderIDInput) (*out[orderJSON], error) {
	o, err := s.svc.CancelOrder(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toOrder(o))
}

type orderJSON struct {
	ID            string     `json:"id" example:"ord-01HZX"`
	Name          string     `json:"name"`
	Team          string     `json:"team"`
	Mode          string     `json:"mode" enum:"notify,buy"`
	InstanceType  string     `json:"instanceType"`
	InstanceCount int        `json:"instanceCount"`
	Zone          string     `json:"zone,omitempty"`
	DurationHours int        `json:"durationHours"`
	StartAfter    time.Time  `json:"startAfter"`
	EndBefore     time.Time  `json:"endBefore"`
	Deadline      time.Time  `json:"deadline"`
	MaxFee        *moneyJSON `json:"maxFee,omitempty"`
	State         string     `json:"state" enum:"open,notified,bought,expired,cancelled"`
	BlockID       string     `json:"blockId,omitempty" doc:"The block bought (mode buy)."`
	Reason        string     `json:"reason,omitempty" doc:"Why an open order waits, as last seen."`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
}

type ordersJSON struct {
	Orders []orderJSON `json:"orders" nullable:"false"`
}

func toOrder(o core.Order) orderJSON {
	j := orderJSON{ID: o.ID, Name: o.Name, Team: o.Team, Mode: string(o.Mode), InstanceType: o.InstanceType,
		InstanceCount: o.Count, Zone: o.Zone, DurationHours: int(o.Duration / time.Hour), StartAfter: o.StartAfter.UTC(),
		EndBefore: o.EndBefore.UTC(), Deadline: o.Deadline.UTC(), State: string(o.State), BlockID: o.BlockID,
		Reason: o.Reason, CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC()}
	if o.MaxFee.Minor > 0 {
		fee := toMoney(o.MaxFee)
		j.MaxFee = &fee
	}
	return j
}
