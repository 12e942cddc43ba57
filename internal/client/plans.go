package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// PlanOffering is a priced, time-limited quote for a training plan: a
// total duration as one or more segments of the same type, count and zone.
type PlanOffering struct {
	OfferingID    string                `json:"offeringId"`
	Target        string                `json:"target"`
	DurationHours int                   `json:"durationHours"`
	UpfrontFee    Money                 `json:"upfrontFee"`
	OnDemandFee   Money                 `json:"onDemandFee"`
	ExpiresAt     time.Time             `json:"expiresAt"`
	Segments      []PlanOfferingSegment `json:"segments"`
}

// PlanOfferingSegment is one window of a plan offering.
type PlanOfferingSegment struct {
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	Zone          string    `json:"zone"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours"`
	UpfrontFee    Money     `json:"upfrontFee"`
}

// Plan is a purchased training plan; its State and counts are derived from
// its segments when read.
type Plan struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Team       string        `json:"team"`
	Target     string        `json:"target"`
	State      string        `json:"state"`
	Segments   []PlanSegment `json:"segments"`
	UpfrontFee Money         `json:"upfrontFee"`
	CreatedAt  time.Time     `json:"createdAt"`
	Total      int           `json:"total"`
	Available  int           `json:"available"`
	InUse      int           `json:"inUse"`
	Unhealthy  int           `json:"unhealthy"`
}

// PlanSegment is one block of a plan.
type PlanSegment struct {
	BlockID       string    `json:"blockId"`
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	Zone          string    `json:"zone"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours"`
	State         string    `json:"state"`
}

// PlanOfferingsQuery is a search for plan offerings; zero values are left
// to the server's defaults.
type PlanOfferingsQuery struct {
	InstanceType  string
	InstanceCount int
	DurationHours int
	StartAfter    time.Time
	EndBefore     time.Time
	Zone          string
	Target        string
	MaxSegments   int
	MaxResults    int
}

// BuyPlanRequest is the body of POST /v1/plans. The same ClientToken makes
// a retry return the same plan instead of buying twice.
type BuyPlanRequest struct {
	OfferingID  string `json:"offeringId"`
	ClientToken string `json:"clientToken"`
	Name        string `json:"name,omitempty"`
	// Team is the team an admin buys for; empty means the caller's own.
	Team string `json:"team,omitempty"`
}

// PlanOfferings searches plan offerings, best first: GET /v1/plan-offerings.
// An empty list means nothing fits.
func (c *Client) PlanOfferings(ctx context.Context, q PlanOfferingsQuery) ([]PlanOffering, error) {
	v := url.Values{}
	v.Set("instanceType", q.InstanceType)
	v.Set("instanceCount", strconv.Itoa(q.InstanceCount))
	setInt(v, "durationHours", q.DurationHours)
	setTime(v, "startAfter", q.StartAfter)
	setTime(v, "endBefore", q.EndBefore)
	if q.Zone != "" {
		v.Set("zone", q.Zone)
	}
	if q.Target != "" {
		v.Set("target", q.Target)
	}
	setInt(v, "maxSegments", q.MaxSegments)
	setInt(v, "maxResults", q.MaxResults)
	var out struct {
		PlanOfferings []PlanOffering `json:"planOfferings"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/plan-offerings", query: v}, &out); err != nil {
		return nil, wrapf(err, "searching plan offerings")
	}
	return out.PlanOfferings, nil
}

// BuyPlan purchases a plan offering: POST /v1/plans. Like Buy, a purchase
// with a ClientToken is retried once after a rate_limited answer.
func (c *Client) BuyPlan(ctx context.Context, req BuyPlanRequest) (Plan, error) {
	var p Plan
	r := request{method: http.MethodPost, path: "/v1/plans", body: req, idempotent: req.ClientToken != ""}
	if err := c.do(ctx, r, &p); err != nil {
		return Plan{}, wrapf(err, "buying plan offering")
	}
	return p, nil
}

// Plans lists the caller's plans: GET /v1/plans.
func (c *Client) Plans(ctx context.Context) ([]Plan, error) {
	return c.PlansMatching(ctx, ListFilter{})
}

// Plan fetches one plan: GET /v1/plans/{id}.
func (c *Client) Plan(ctx context.Context, id string) (Plan, error) {
	var p Plan
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/plans/" + url.PathEscape(id)}, &p); err != nil {
		return Plan{}, wrapf(err, "getting plan %s", id)
	}
	return p, nil
}

// CancelPlan cancels what is left of a plan: POST /v1/plans/{id}/cancel.
func (c *Client) CancelPlan(ctx context.Context, id string) (Plan, error) {
	var p Plan
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/plans/" + url.PathEscape(id) + "/cancel"}, &p); err != nil {
		return Plan{}, wrapf(err, "cancelling plan %s", id)
	}
	return p, nil
}
