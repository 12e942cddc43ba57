package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerPlans declares "Training plans": search, purchase and reads.
func (s *server) registerPlans(api huma.API) {
	huma.Register(api, s.operation("searchPlanOfferings", http.MethodGet, "/v1/plan-offerings", "plans",
		"Search priced offerings for a training plan: a total duration in one or more segments, best first"), s.searchPlanOfferings)

	registerPurchase(api, s.operation("purchasePlan", http.MethodPost, "/v1/plans", "plans",
		"Buy a plan offering: every segment becomes a block; the same clientToken again returns the same plan"), "plan", s.purchasePlan)

	huma.Register(api, s.operation("listPlans", http.MethodGet, "/v1/plans", "plans",
		"List the team's training plans"), s.listPlans)
	huma.Register(api, s.operation("getPlan", http.MethodGet, "/v1/plans/{id}", "plans",
		"Get a training plan"), s.getPlan)
	huma.Register(api, s.operation("cancelPlan", http.MethodPost, "/v1/plans/{id}/cancel", "plans",
		"Cancel what is left of a training plan: every segment still to come or active, each refunded per the operator's policy"), s.cancelPlan)
}

type planOfferingsInput struct {
	InstanceType  string `query:"instanceType" required:"true" minLength:"1" example:"h100.8x"`
	InstanceCount int    `query:"instanceCount" required:"true" minimum:"1" maximum:"1000000"`
	DurationHours int    `query:"durationHours" required:"true" minimum:"1" maximum:"1000000" doc:"Total duration, summed over the segments."`
	StartAfter    string `query:"startAfter" required:"true" format:"date-time" doc:"Earliest start (RFC 3339)."`
	EndBefore     string `query:"endBefore" required:"true" format:"date-time" doc:"Latest end (RFC 3339)."`
	Zone          string `query:"zone" doc:"One zone; all zones when empty."`
	Target        string `query:"target" enum:"training-job,cluster" default:"training-job"`
	MaxSegments   int    `query:"maxSegments" minimum:"1" maximum:"4" default:"2" doc:"At most this many segments (blocks) per plan."`
	MaxResults    int    `query:"maxResults" minimum:"1" maximum:"50" default:"6"`
	Team          string `query:"team" maxLength:"64" doc:"An admin searching for another team names it here (its id): that team's quota bounds each segment, as its purchase would be bounded."`
}

// Resolve checks that the window is not empty.
func (in *planOfferingsInput) Resolve(huma.Context) []error {
	return checkRange("query.endBefore", "endBefore", in.StartAfter, in.EndBefore, "startAfter")
}

// searchPlanOfferings searches for the caller's team, or the team an admin
// names: each segment respects that team's quota.
func (s *server) searchPlanOfferings(ctx context.Context, in *planOfferingsInput) (*out[planOfferingsJSON], error) {
	team := s.teamFor(ctx, in.Team)
	offerings, err := s.svc.PlanOfferings(ctx, core.PlanSearchRequest{
		Team:        team,
		Type:        in.InstanceType,
		Count:       in.InstanceCount,
		Duration:    hours(in.DurationHours),
		StartAfter:  parseTime(in.StartAfter),
		EndBefore:   parseTime(in.EndBefore),
		Zone:        in.Zone,
		Target:      in.Target,
		MaxSegments: in.MaxSegments,
		MaxResults:  in.MaxResults,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toPlanOfferings(offerings))
}

type purchasePlanRequestJSON struct {
	OfferingID  string `json:"offeringId" minLength:"1" maxLength:"4096" doc:"A plan offering id (tpo-…) from GET /v1/plan-offerings."`
	ClientToken string `json:"clientToken" minLength:"1" maxLength:"64" doc:"Idempotency key: the same token returns the same plan."`
	Name        string `json:"name,omitempty" maxLength:"128"`
	Team        string `json:"team,omitempty" maxLength:"64" doc:"An admin buying for another team names it here (its id)."`
}

type purchasePlanInput struct {
	Body purchasePlanRequestJSON
}

func (s *server) purchasePlan(ctx context.Context, in *purchasePlanInput) (*purchaseOutput[planJSON], error) {
	team := s.teamFor(ctx, in.Body.Team)
	p, created, err := s.svc.PurchasePlan(ctx, contract.PlanPurchaseRequest{
		Team:        team,
		OfferingID:  in.Body.OfferingID,
		ClientToken: in.Body.ClientToken,
		Name:        in.Body.Name,
	})
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return purchased(toPlan(p), created), nil
}

type listPlansInput struct {
	State []string `query:"state,explode" enum:"pending,scheduled,active,expired,failed,cancelled" doc:"Only plans in these states (repeat the parameter); all when absent."`
	Team  string   `query:"team" maxLength:"64" doc:"Only this team's plans (its id). A team outside the caller's scope has none to show: a filter never widens what the caller may see."`
}

func (s *server) listPlans(ctx context.Context, in *listPlansInput) (*out[plansJSON], error) {
	f := listFilter{states: in.State, team: in.Team}
	plans, err := s.svc.ListPlans(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := plansJSON{Plans: make([]planJSON, 0, len(plans))}
	for _, p := range plans {
		if j := toPlan(p); f.keep(j.State, j.Team, nil) {
			resp.Plans = append(resp.Plans, j)
		}
	}
	return reply(resp)
}

type planIDInput struct {
	ID string `path:"id" example:"tp-01HZX" doc:"Plan id."`
}

func (s *server) getPlan(ctx context.Context, in *planIDInput) (*out[planJSON], error) {
	p, err := s.svc.GetPlan(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toPlan(p))
}

func (s *server) cancelPlan(ctx context.Context, in *planIDInput) (*out[planJSON], error) {
	p, err := s.svc.CancelPlan(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toPlan(p))
}

// Wire shapes of API.md "Training plans".

type planOfferingSegmentJSON struct {
	InstanceType  string    `json:"instanceType" example:"h100.8x"`
	InstanceCount int       `json:"instanceCount" example:"4"`
	Zone          string    `json:"zone" example:"zone-a"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours" example:"24"`
	UpfrontFee    moneyJSON `json:"upfrontFee"`
}

type planOfferingJSON struct {
	OfferingID    string                    `json:"offeringId" example:"tpo-AAECAw"`
	Target        string                    `json:"target" enum:"training-job,cluster"`
	DurationHours int                       `json:"durationHours" example:"48" doc:"The segments' hours, summed."`
	UpfrontFee    moneyJSON                 `json:"upfrontFee" doc:"The segments' fees, summed."`
	OnDemandFee   moneyJSON                 `json:"onDemandFee" doc:"What the same instance-hours cost on demand."`
	ExpiresAt     time.Time                 `json:"expiresAt" doc:"The quote cannot be bought after this time."`
	Segments      []planOfferingSegmentJSON `json:"segments" nullable:"false" doc:"In time order; gaps between them are not reserved."`
}

type planOfferingsJSON struct {
	PlanOfferings []planOfferingJSON `json:"planOfferings" doc:"Best first (earliest end, lowest fee, fewest segments); empty when nothing fits." nullable:"false"`
}

func toPlanOfferings(os []core.PlanOffering) planOfferingsJSON {
	out := planOfferingsJSON{PlanOfferings: make([]planOfferingJSON, 0, len(os))}
	for _, o := range os {
		j := planOfferingJSON{
			OfferingID:    o.ID,
			Target:        o.Target,
			DurationHours: o.DurationHours(),
			UpfrontFee:    toMoney(o.Fee()),
			OnDemandFee:   toMoney(o.OnDemandFee()),
			ExpiresAt:     o.ExpiresAt.UTC(),
			Segments:      make([]planOfferingSegmentJSON, 0, len(o.Segments)),
		}
		for _, s := range o.Segments {
			j.Segments = append(j.Segments, planOfferingSegmentJSON{
				InstanceType:  o.InstanceType,
				InstanceCount: o.Count,
				Zone:          o.Zone,
				StartTime:     s.Start.UTC(),
				EndTime:       s.End.UTC(),
				DurationHours: s.DurationHours(),
				UpfrontFee:    toMoney(s.Fee),
			})
		}
		out.PlanOfferings = append(out.PlanOfferings, j)
	}
	return out
}

type planSegmentJSON struct {
	BlockID       string    `json:"blockId" example:"cb-01HZX"`
	InstanceType  string    `json:"instanceType" example:"h100.8x"`
	InstanceCount int       `json:"instanceCount" example:"4"`
	Zone          string    `json:"zone" example:"zone-a"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours" example:"24"`
	State         string    `json:"state" enum:"payment-pending,scheduled,active,expired,payment-failed,cancelled,failed"`
}

type planJSON struct {
	ID         string            `json:"id" example:"tp-01HZX"`
	Name       string            `json:"name"`
	Team       string            `json:"team"`
	Target     string            `json:"target" enum:"training-job,cluster"`
	State      string            `json:"state" enum:"pending,scheduled,active,expired,failed,cancelled" doc:"Derived from the segments: scheduled also between segments; cancelled once cancelled (POST /v1/plans/{id}/cancel)."`
	Segments   []planSegmentJSON `json:"segments" nullable:"false"`
	UpfrontFee moneyJSON         `json:"upfrontFee"`
	CreatedAt  time.Time         `json:"createdAt"`
	Total      int               `json:"total" doc:"Instances of the current or next segment."`
	Available  int               `json:"available" doc:"Instances usable now: the active segment's, less those on unhealthy nodes."`
	InUse      int               `json:"inUse" doc:"Instances that jobs run on."`
	Unhealthy  int               `json:"unhealthy" doc:"Instances of the current or next segment on unhealthy nodes."`
}

type plansJSON struct {
	Plans []planJSON `json:"plans" nullable:"false"`
}

func toPlan(v contract.PlanView) planJSON {
	p := v.Plan
	out := planJSON{
		ID:         p.ID,
		Name:       p.Name,
		Team:       p.Team,
		Target:     p.Target,
		State:      string(v.State),
		Segments:   make([]planSegmentJSON, 0, len(p.Segments)),
		UpfrontFee: toMoney(p.Fee),
		CreatedAt:  p.CreatedAt.UTC(),
		Total:      v.Capacity.Total,
		Available:  v.Capacity.Available,
		InUse:      v.Capacity.InUse,
		Unhealthy:  v.Capacity.Unhealthy,
	}
	for _, b := range p.Segments {
		out.Segments = append(out.Segments, planSegmentJSON{
			BlockID:       b.ID,
			InstanceType:  b.InstanceType,
			InstanceCount: b.Count,
			Zone:          b.Zone,
			StartTime:     b.Start.UTC(),
			EndTime:       b.End.UTC(),
			DurationHours: b.DurationHours(),
			State:         string(b.State),
		})
	}
	return out
}
