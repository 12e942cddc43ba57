package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// planFake adds the plan calls to the fake service: one plan offering and
// one plan, and what the API passed.
type planFake struct {
	*fakeService
	offerings []core.PlanOffering
	plan      contract.PlanView
	created   bool
	err       error

	gotSearch   core.PlanSearchRequest
	gotPurchase contract.PlanPurchaseRequest
	gotTeam     string
}

func (f *planFake) PlanOfferings(_ context.Context, req core.PlanSearchRequest) ([]core.PlanOffering, error) {
	f.gotSearch = req
	return f.offerings, f.err
}

func (f *planFake) PurchasePlan(_ context.Context, req contract.PlanPurchaseRequest) (contract.PlanView, bool, error) {
	f.gotPurchase = req
	return f.plan, f.created, f.err
}

func (f *planFake) ListPlans(_ context.Context, team string) ([]contract.PlanView, error) {
	f.gotTeam = team
	return []contract.PlanView{f.plan}, f.err
}

func (f *planFake) GetPlan(_ context.Context, team, id string) (contract.PlanView, error) {
	f.gotTeam = team
	if id != f.plan.Plan.ID {
		return contract.PlanView{}, fmt.Errorf("%w: plan %s", core.ErrNotFound, id)
	}
	return f.plan, f.err
}

func newPlanAPI(t *testing.T, f *planFake) *testAPI {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &bytes.Buffer{}
	return &testAPI{handler: recordProblems(f, New(f, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg})),
		fake: f.fakeService, logs: logs, registry: reg}
}

func testPlanOffering() core.PlanOffering {
	usd := func(m int64) core.Money { return core.Money{Minor: m, Currency: "USD"} }
	return core.PlanOffering{ID: "tpo-abc", Target: core.TargetTrainingJob, InstanceType: "h100.8x", Count: 4, Zone: "zone-a",
		Segments: []core.PlanSegment{
			{Start: t0.Add(2 * time.Hour), End: t0.Add(26 * time.Hour), Fee: usd(100000), OnDemandFee: usd(150000)},
			{Start: t0.Add(38 * time.Hour), End: t0.Add(62 * time.Hour), Fee: usd(90000), OnDemandFee: usd(150000)},
		},
		ExpiresAt: t0.Add(10 * time.Minute)}
}

func testPlan() contract.PlanView {
	seg := func(id string, from, to int, state core.BlockState) core.Block {
		return core.Block{ID: id, PlanID: "tp-1", InstanceType: "h100.8x", Count: 4, Zone: "zone-a", State: state,
			Start: t0.Add(time.Duration(from) * time.Hour), End: t0.Add(time.Duration(to) * time.Hour)}
	}
	return contract.PlanView{
		Plan: core.Plan{ID: "tp-1", Name: "llama", Team: "default", Target: core.TargetTrainingJob,
			Fee: core.Money{Minor: 190000, Currency: "USD"}, CreatedAt: t0,
			Segments: []core.Block{seg("cb-1", 2, 26, core.StateActive), seg("cb-2", 38, 62, core.StateScheduled)}},
		State:    core.PlanActive,
		Capacity: core.PlanCapacity{Total: 4, Available: 3, Unhealthy: 1},
	}
}

const planJSONWant = `{"id": "tp-1", "name": "llama", "team": "default", "target": "training-job", "state": "active",
	"segments": [
		{"blockId": "cb-1", "instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a",
		 "startTime": "2026-05-01T12:00:00Z", "endTime": "2026-05-02T12:00:00Z", "durationHours": 24, "state": "active"},
		{"blockId": "cb-2", "instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a",
		 "startTime": "2026-05-03T00:00:00Z", "endTime": "2026-05-04T00:00:00Z", "durationHours": 24, "state": "scheduled"}],
	"upfrontFee": {"amount": "1900.00", "currency": "USD"}, "createdAt": "2026-05-01T10:00:00Z",
	"total": 4, "available": 3, "inUse": 0, "unhealthy": 1}`

func TestSearchPlanOfferings(t *testing.T) {
	const window = "&startAfter=2026-05-01T12:00:00Z&endBefore=2026-05-15T00:00:00Z"
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	end := time.Date(2026, 5, 15, 0, 0, 0, 0, time.UTC)
	f := &planFake{fakeService: newFake(), offerings: []core.PlanOffering{testPlanOffering()}}
	a := newPlanAPI(t, f)
	checkJSON(t, a.do(t, http.MethodGet, "/v1/plan-offerings?instanceType=h100.8x&instanceCount=4&durationHours=48"+window, ""), http.StatusOK,
		`{"planOfferings": [{"offeringId": "tpo-abc", "target": "training-job", "durationHours": 48,
		"upfrontFee": {"amount": "1900.00", "currency": "USD"}, "onDemandFee": {"amount": "3000.00", "currency": "USD"},
		"expiresAt": "2026-05-01T10:10:00Z", "segments": [
			{"instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-05-01T12:00:00Z",
			 "endTime": "2026-05-02T12:00:00Z", "durationHours": 24, "upfrontFee": {"amount": "1000.00", "currency": "USD"}},
			{"instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-05-03T00:00:00Z",
			 "endTime": "2026-05-04T00:00:00Z", "durationHours": 24, "upfrontFee": {"amount": "900.00", "currency": "USD"}}]}]}`)
	want := core.PlanSearchRequest{Type: "h100.8x", Count: 4, Duration: 48 * time.Hour, StartAfter: start, EndBefore: end,
		Target: core.TargetTrainingJob, MaxSegments: 2, MaxResults: 6, Team: "default"} // the caller's team: its quota applies
	if diff := cmp.Diff(want, f.gotSearch); diff != "" {
		t.Errorf("search request with defaults (-want +got):\n%s", diff)
	}
	a.do(t, http.MethodGet, "/v1/plan-offerings?instanceType=h100.8x&instanceCount=4&durationHours=48&zone=zone-b&target=cluster&maxSegments=4&maxResults=2"+window, "")
	want.Zone, want.Target, want.MaxSegments, want.MaxResults = "zone-b", core.TargetCluster, 4, 2
	if diff := cmp.Diff(want, f.gotSearch); diff != "" {
		t.Errorf("search request (-want +got):\n%s", diff)
	}
	f.offerings = nil
	checkJSON(t, a.do(t, http.MethodGet, "/v1/plan-offerings?instanceType=h100.8x&instanceCount=4&durationHours=48"+window, ""), http.StatusOK,
		`{"planOfferings": []}`)
}

func TestSearchPlanOfferingsInvalid(t *testing.T) {
	const window = "&startAfter=2026-05-01T12:00:00Z&endBefore=2026-05-15T00:00:00Z"
	tests := map[string]struct {
		query string
		want  string
	}{
		"no duration":       {"instanceType=h100.8x&instanceCount=4" + window, "query.durationHours"},
		"too many segments": {"instanceType=h100.8x&instanceCount=4&durationHours=48&maxSegments=5" + window, "query.maxSegments"},
		"unknown target":    {"instanceType=h100.8x&instanceCount=4&durationHours=48&target=notebook" + window, "query.target"},
		"empty window": {"instanceType=h100.8x&instanceCount=4&durationHours=48&startAfter=2026-05-02T00:00:00Z&endBefore=2026-05-01T00:00:00Z",
			"endBefore must be after startAfter"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newPlanAPI(t, &planFake{fakeService: newFake()})
			checkProblem(t, a.do(t, http.MethodGet, "/v1/plan-offerings?"+tc.query, ""), wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.want})
		})
	}
}

func TestPurchasePlan(t *testing.T) {
	f := &planFake{fakeService: newFake(), plan: testPlan(), created: true}
	a := newPlanAPI(t, f)
	body := `{"offeringId": "tpo-abc", "clientToken": "tok-1", "name": "llama"}`
	checkJSON(t, a.do(t, http.MethodPost, "/v1/plans", body), http.StatusCreated, planJSONWant)
	if diff := cmp.Diff(contract.PlanPurchaseRequest{Team: "default", OfferingID: "tpo-abc", ClientToken: "tok-1", Name: "llama"}, f.gotPurchase); diff != "" {
		t.Errorf("purchase request (-want +got):\n%s", diff)
	}
	f.created = false
	checkJSON(t, a.do(t, http.MethodPost, "/v1/plans", body), http.StatusOK, planJSONWant)

	for name, tc := range map[string]struct {
		body string
		err  error
		want wantProblem
	}{
		"tampered":     {body: body, err: fmt.Errorf("%w: malformed", core.ErrOfferingInvalid), want: wantProblem{http.StatusBadRequest, CodeOfferingInvalid, "malformed"}},
		"expired":      {body: body, err: fmt.Errorf("%w: at noon", core.ErrOfferingExpired), want: wantProblem{http.StatusGone, CodeOfferingExpired, "at noon"}},
		"gone":         {body: body, err: fmt.Errorf("segment 2: %w", core.ErrNoCapacity), want: wantProblem{http.StatusConflict, CodeNoCapacity, "segment 2"}},
		"token reused": {body: body, err: core.ErrIdempotencyMismatch, want: wantProblem{http.StatusConflict, CodeIdempotencyMismatch, ""}},
		"no token":     {body: `{"offeringId": "tpo-abc"}`, want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "clientToken"}},
	} {
		t.Run(name, func(t *testing.T) {
			f.err = tc.err
			checkProblem(t, a.do(t, http.MethodPost, "/v1/plans", tc.body), tc.want)
		})
	}
}

func TestGetAndListPlans(t *testing.T) {
	f := &planFake{fakeService: newFake(), plan: testPlan()}
	a := newPlanAPI(t, f)
	checkJSON(t, a.do(t, http.MethodGet, "/v1/plans/tp-1", ""), http.StatusOK, planJSONWant)
	if f.gotTeam != "default" {
		t.Errorf("scope %q, want the member's team", f.gotTeam)
	}
	checkJSON(t, a.do(t, http.MethodGet, "/v1/plans", ""), http.StatusOK, `{"plans": [`+planJSONWant+`]}`)
	checkProblem(t, a.do(t, http.MethodGet, "/v1/plans/tp-404", ""), wantProblem{http.StatusNotFound, CodeNotFound, "tp-404"})
}
