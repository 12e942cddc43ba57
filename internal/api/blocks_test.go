package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/contract"
	"capblock/internal/core"
)

const offeringJSONWant = `{"offeringId": "cbo-abc.sig", "instanceType": "h100.8x", "instanceCount": 2,
	"zone": "zone-a", "startTime": "2026-05-02T10:00:00Z", "endTime": "2026-05-04T10:00:00Z",
	"durationHours": 48, "upfrontFee": {"amount": "1234.56", "currency": "USD"},
	"onDemandFee": {"amount": "9456.00", "currency": "USD"}, "expiresAt": "2026-05-01T10:10:00Z", "alternative": false}`

const blockJSONWant = `{"id": "cb-1", "name": "load test", "team": "default", "instanceType": "h100.8x",
	"gpuModel": "H100", "instanceCount": 2, "zone": "zone-a", "startTime": "2026-05-02T10:00:00Z",
	"endTime": "2026-05-04T10:00:00Z", "durationHours": 48, "state": "%s",
	"upfrontFee": {"amount": "1234.56", "currency": "USD"}, "createdAt": "2026-05-01T10:00:01.5Z",
	"tags": {"env": "prod"}}`

func TestSearchOfferings(t *testing.T) {
	const window = "&startAfter=2026-05-01T12:00:00Z&endBefore=2026-05-15T00:00:00%2B02:00"
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	end := time.Date(2026, 5, 14, 22, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		query     string
		offerings []core.Offering
		wantReq   core.SearchRequest
		wantBody  string
	}{
		"exact duration, default maxResults": {
			query:     "instanceType=h100.8x&instanceCount=2&durationHours=48" + window,
			offerings: []core.Offering{testOffering()},
			wantReq: core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 48 * time.Hour,
				StartAfter: start, EndBefore: end, MaxResults: 6, Team: "default"},
			wantBody: `{"offerings": [` + offeringJSONWant + `]}`,
		},
		"an alternative is marked": {
			query:     "instanceType=h100.8x&instanceCount=2&durationHours=48" + window,
			offerings: []core.Offering{testOffering(), shorterOffering()},
			wantReq: core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 48 * time.Hour,
				StartAfter: start, EndBefore: end, MaxResults: 6, Team: "default"},
			wantBody: `{"offerings": [` + offeringJSONWant + `, ` + strings.NewReplacer(`"cbo-abc.sig"`, `"cbo-short.sig"`,
				`"2026-05-04T10:00:00Z"`, `"2026-05-04T05:00:00Z"`, `"durationHours": 48`, `"durationHours": 43`,
				`"alternative": false`, `"alternative": true`).Replace(offeringJSONWant) + `]}`,
		},
		"duration range, several types, zone": {
			query: "instanceType=h100.8x&instanceType=a100.8x&instanceCount=1&minDurationHours=4&maxDurationHours=8&zone=zone-a&maxResults=50" + window,
			wantReq: core.SearchRequest{Types: []string{"h100.8x", "a100.8x"}, Count: 1, MinDuration: 4 * time.Hour,
				MaxDuration: 8 * time.Hour, StartAfter: start, EndBefore: end, Zone: "zone-a", MaxResults: 50, Team: "default"},
			wantBody: `{"offerings": []}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.offerings = tc.offerings
			a := newTestAPI(t, fake, Options{})
			checkJSON(t, a.do(t, http.MethodGet, "/v1/offerings?"+tc.query, ""), http.StatusOK, tc.wantBody)
			if diff := cmp.Diff(tc.wantReq, fake.gotSearch); diff != "" {
				t.Errorf("search request (-want +got):\n%s", diff)
			}
		})
	}
}

// teamsFake knows the teams "default" and "team-ml", for an admin's
// search for another team.
type teamsFake struct{ *fakeService }

func (f teamsFake) Team(_ context.Context, _, id string) (core.Team, error) {
	if id != "default" && id != "team-ml" {
		return core.Team{}, fmt.Errorf("%w: team %s", core.ErrNotFound, id)
	}
	return core.Team{ID: id, Name: id}, nil
}

func TestSearchOfferingsForATeam(t *testing.T) {
	const query = "/v1/offerings?instanceType=h100.8x&instanceCount=10&durationHours=96" +
		"&startAfter=2026-05-01T12:00:00Z&endBefore=2026-05-15T00:00:00Z"
	quotaErr := fmt.Errorf("%w: 10 instances in one block, above the team's limit of 8 per block", core.ErrQuotaExceeded)
	tests := map[string]struct {
		token    string
		team     string
		err      error
		wantTeam string
		want     *wantProblem
	}{
		"a member searches for its team":               {token: memberToken, wantTeam: "default"},
		"a member may name its own team":               {token: memberToken, team: "default", wantTeam: "default"},
		"an admin searches for the team it names":      {token: adminToken, team: "team-ml", wantTeam: "team-ml"},
		"a search beyond the quota names the limit":    {token: memberToken, err: quotaErr, wantTeam: "default", want: &wantProblem{http.StatusForbidden, CodeQuotaExceeded, "limit of 8 per block"}},
		"an admin without a team searches for its own": {token: adminToken, wantTeam: "team-ops"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.err = tc.err
			a := &testAPI{handler: New(teamsFake{fake}, Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}), fake: fake}
			target := query
			if tc.team != "" {
				target += "&team=" + tc.team
			}
			r := a.doAs(t, tc.token, http.MethodGet, target, "")
			if tc.want != nil {
				checkProblem(t, r, *tc.want)
			} else if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if fake.gotSearch.Team != tc.wantTeam {
				t.Errorf("searched for team %q, want %q", fake.gotSearch.Team, tc.wantTeam)
			}
		})
	}
}

func TestSearchOfferingsInvalid(t *testing.T) {
	const window = "&startAfter=2026-05-01T12:00:00Z&endBefore=2026-05-15T00:00:00Z"
	tests := map[string]struct {
		query string
		want  string // words of the detail; all are 400 invalid_argument
	}{
		"no instance type":       {"instanceCount=2&durationHours=48" + window, "query.instanceType"},
		"empty instance type":    {"instanceType=h100.8x&instanceType=&instanceCount=2&durationHours=48" + window, "query.instanceType[1]"},
		"no count":               {"instanceType=h100.8x&durationHours=48" + window, "query.instanceCount"},
		"zero count":             {"instanceType=h100.8x&instanceCount=0&durationHours=48" + window, "query.instanceCount: expected number >= 1"},
		"count not a number":     {"instanceType=h100.8x&instanceCount=two&durationHours=48" + window, "query.instanceCount"},
		"no duration":            {"instanceType=h100.8x&instanceCount=2" + window, "durationHours (or minDurationHours and maxDurationHours) is required"},
		"both duration forms":    {"instanceType=h100.8x&instanceCount=2&durationHours=48&minDurationHours=4&maxDurationHours=8" + window, "not both"},
		"min without max":        {"instanceType=h100.8x&instanceCount=2&minDurationHours=4" + window, "query.maxDurationHours"},
		"max without min":        {"instanceType=h100.8x&instanceCount=2&maxDurationHours=4" + window, "query.minDurationHours"},
		"min above max":          {"instanceType=h100.8x&instanceCount=2&minDurationHours=9&maxDurationHours=8" + window, "at least minDurationHours"},
		"zero duration":          {"instanceType=h100.8x&instanceCount=2&durationHours=0" + window, "query.durationHours"},
		"fractional duration":    {"instanceType=h100.8x&instanceCount=2&durationHours=1.5" + window, "query.durationHours"},
		"huge duration":          {"instanceType=h100.8x&instanceCount=2&durationHours=99999999999" + window, "query.durationHours"},
		"no startAfter":          {"instanceType=h100.8x&instanceCount=2&durationHours=48&endBefore=2026-05-15T00:00:00Z", "query.startAfter"},
		"no endBefore":           {"instanceType=h100.8x&instanceCount=2&durationHours=48&startAfter=2026-05-15T00:00:00Z", "query.endBefore"},
		"bad startAfter":         {"instanceType=h100.8x&instanceCount=2&durationHours=48&startAfter=now&endBefore=2026-05-15T00:00:00Z", "query.startAfter: expected string to be RFC 3339 date-time"},
		"endBefore first":        {"instanceType=h100.8x&instanceCount=2&durationHours=48&startAfter=2026-05-15T00:00:00Z&endBefore=2026-05-15T00:00:00Z", "endBefore must be after startAfter"},
		"maxResults above 50":    {"instanceType=h100.8x&instanceCount=2&durationHours=48&maxResults=51" + window, "query.maxResults"},
		"maxResults zero":        {"instanceType=h100.8x&instanceCount=2&durationHours=48&maxResults=0" + window, "query.maxResults"},
		"several errors at once": {"instanceCount=0&durationHours=48" + window, "query.instanceType"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			a := newTestAPI(t, fake, Options{})
			r := a.do(t, http.MethodGet, "/v1/offerings?"+tc.query, "")
			checkProblem(t, r, wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.want})
			if fake.gotSearch.Count != 0 {
				t.Errorf("the service was called with %+v", fake.gotSearch)
			}
		})
	}
}

func TestPurchase(t *testing.T) {
	fake := newFake()
	a := newTestAPI(t, fake, Options{})
	body := `{"offeringId": "cbo-abc.sig", "clientToken": "tok-1", "name": "load test", "tags": {"env": "prod"}}`
	want := fmt.Sprintf(blockJSONWant, "scheduled")
	want = strings.Replace(want, "10:00:01.5Z", "10:00:00Z", 1)

	checkJSON(t, a.do(t, http.MethodPost, "/v1/blocks", body), http.StatusCreated, want)
	wantReq := contract.PurchaseRequest{Team: "default", OfferingID: "cbo-abc.sig", ClientToken: "tok-1", Name: "load test",
		Tags: map[string]string{"env": "prod"}}
	if diff := cmp.Diff(wantReq, fake.gotPurchase); diff != "" {
		t.Errorf("purchase request (-want +got):\n%s", diff)
	}

	// The same token again is a replay: 200 with the same block.
	checkJSON(t, a.do(t, http.MethodPost, "/v1/blocks", body), http.StatusOK, want)

	// The same token for another offering is refused.
	other := `{"offeringId": "cbo-other.sig", "clientToken": "tok-1"}`
	checkProblem(t, a.do(t, http.MethodPost, "/v1/blocks", other),
		wantProblem{http.StatusConflict, CodeIdempotencyMismatch, "client token reused"})
}

func TestPurchaseWithoutOptionalFields(t *testing.T) {
	fake := newFake()
	a := newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodPost, "/v1/blocks", `{"offeringId": "cbo-abc.sig", "clientToken": "t"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("status = %d, body %s", r.status, r.body)
	}
	got := r.json(t).(map[string]any)
	if diff := cmp.Diff(map[string]any{}, got["tags"]); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	if got["name"] != "" || fake.gotPurchase.Team != "default" {
		t.Errorf("name %q, team %q", got["name"], fake.gotPurchase.Team)
	}
}

func TestPurchaseInvalid(t *testing.T) {
	tags := func(n, keyLen, valueLen int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("%q: %q", fmt.Sprintf("%0*d", keyLen, i), strings.Repeat("v", valueLen)))
		}
		return `{"offeringId": "cbo-abc.sig", "clientToken": "t", "tags": {` + strings.Join(parts, ", ") + `}}`
	}
	tests := map[string]struct {
		body string
		want wantProblem
	}{
		"unknown field": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "colour": "red"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.colour: unexpected property"},
		},
		"missing clientToken": {
			body: `{"offeringId": "cbo-abc.sig"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "clientToken"},
		},
		"empty clientToken": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": ""}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.clientToken"},
		},
		"clientToken too long": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "` + strings.Repeat("x", 65) + `"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.clientToken: expected length <= 64"},
		},
		"missing offeringId": {
			body: `{"clientToken": "t"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "offeringId"},
		},
		"name too long": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "` + strings.Repeat("é", 129) + `"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.name"},
		},
		"too many tags":    {tags(51, 2, 1), wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.tags"}},
		"tag key too long": {tags(1, 129, 1), wantProblem{http.StatusBadRequest, CodeInvalidArgument, "tag key of at most 128"}},
		"tag value too long": {
			body: tags(1, 1, 257),
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "tag value of at most 256"},
		},
		"tag not a string": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "tags": {"a": 1}}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.tags.a"},
		},
		"wrong type": {
			body: `{"offeringId": 7, "clientToken": "t"}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.offeringId"},
		},
		"malformed JSON": {
			body: `{"offeringId": "cbo-abc.sig",`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body"},
		},
		"trailing garbage": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t"} {}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body"},
		},
		"not an object": {
			body: `[]`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body"},
		},
		"oversized body": {
			body: `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "` + strings.Repeat("x", 2048) + `"}`,
			want: wantProblem{http.StatusRequestEntityTooLarge, CodeInvalidArgument, "too large"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			a := newTestAPI(t, fake, Options{MaxBodyBytes: 1024})
			checkProblem(t, a.do(t, http.MethodPost, "/v1/blocks", tc.body), tc.want)
			if fake.gotPurchase.ClientToken != "" {
				t.Errorf("the service was called with %+v", fake.gotPurchase)
			}
		})
	}
}

func TestBodyLimitIsInclusive(t *testing.T) {
	body := `{"offeringId": "cbo-abc.sig", "clientToken": "t", "name": "`
	body += strings.Repeat("x", 100-len(body)-2) + `"}`
	a := newTestAPI(t, newFake(), Options{MaxBodyBytes: 100})
	if r := a.do(t, http.MethodPost, "/v1/blocks", body); r.status != http.StatusCreated {
		t.Errorf("a body of exactly MaxBodyBytes: status %d, body %s", r.status, r.body)
	}
	if r := a.do(t, http.MethodPost, "/v1/blocks", body+" "); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body one byte over: status %d, body %s", r.status, r.body)
	}
}

func TestPurchaseWrongContentType(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	req := `{"offeringId": "cbo-abc.sig", "clientToken": "t"}`
	r := a.doWith(t, http.MethodPost, "/v1/blocks", req, "text/plain")
	checkProblem(t, r, wantProblem{http.StatusUnsupportedMediaType, CodeInvalidArgument, "text/plain"})
}

func TestBlockRoutes(t *testing.T) {
	status := contract.BlockStatus{
		Total: 2, Available: 1, Unavailable: 1, Degraded: true, PlacementFinal: false,
		LockInTime: time.Date(2026, 5, 2, 11, 0, 0, 0, time.FixedZone("CEST", 2*3600)),
		Placements: []core.Placement{{Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "n2"}},
		Actions: []core.Action{
			{ID: "ac-cb-1-2-activate", Kind: core.ActionActivate, Subject: "cb-1", State: core.ActionDone, Attempts: 1, LastError: "timeout",
				NextAt: time.Date(2026, 5, 2, 12, 0, 1, 0, time.UTC), CreatedAt: time.Date(2026, 5, 2, 12, 0, 0, 0, time.UTC), DoneAt: time.Date(2026, 5, 2, 12, 0, 2, 0, time.UTC)},
			{ID: "ac-cb-1-3-release", Kind: core.ActionRelease, Subject: "cb-1", State: core.ActionPending, Attempts: 2, LastError: "connection refused",
				NextAt: time.Date(2026, 5, 2, 13, 0, 2, 500000, time.FixedZone("CEST", 2*3600)), CreatedAt: time.Date(2026, 5, 2, 13, 0, 0, 0, time.UTC)},
		},
	}
	tests := map[string]struct {
		method, target, body string
		wantStatus           int
		want                 string
	}{
		"get": {
			method: http.MethodGet, target: "/v1/blocks/cb-1",
			wantStatus: http.StatusOK, want: strings.TrimSuffix(fmt.Sprintf(blockJSONWant, "scheduled"), "}") +
				`, "handovers": [], "utilisation": {"reserved": 0, "used": 0, "lent": 0, "idle": 0}}`,
		},
		"list": {
			method: http.MethodGet, target: "/v1/blocks",
			wantStatus: http.StatusOK, want: `{"blocks": [` + fmt.Sprintf(blockJSONWant, "scheduled") + `]}`,
		},
		"list by state": {
			method: http.MethodGet, target: "/v1/blocks?state=active",
			wantStatus: http.StatusOK, want: `{"blocks": []}`,
		},
		"cancel": {
			method: http.MethodPost, target: "/v1/blocks/cb-1/cancel",
			wantStatus: http.StatusOK, want: fmt.Sprintf(blockJSONWant, "cancelled"),
		},
		"extension offerings": {
			method: http.MethodGet, target: "/v1/blocks/cb-1/extension-offerings?durationHours=2",
			wantStatus: http.StatusOK,
			want: `{"offerings": [{"offeringId": "cbe-ext.sig", "instanceType": "h100.8x", "instanceCount": 2,
				"zone": "zone-a", "startTime": "2026-05-04T10:00:00Z", "endTime": "2026-05-04T12:00:00Z",
				"durationHours": 2, "upfrontFee": {"amount": "5.00", "currency": "USD"},
				"onDemandFee": {"amount": "9.00", "currency": "USD"}, "expiresAt": "2026-05-01T10:10:00Z", "alternative": false}]}`,
		},
		"extend": {
			method: http.MethodPost, target: "/v1/blocks/cb-1/extensions", body: `{"offeringId": "cbe-ext.sig"}`,
			wantStatus: http.StatusOK,
			want: strings.NewReplacer(`"2026-05-04T10:00:00Z"`, `"2026-05-04T12:00:00Z"`, `"durationHours": 48`, `"durationHours": 50`).
				Replace(fmt.Sprintf(blockJSONWant, "scheduled")),
		},
		"status": {
			method: http.MethodGet, target: "/v1/blocks/cb-1/status",
			wantStatus: http.StatusOK,
			want: `{"totalCapacity": 2, "availableCapacity": 1, "unavailableCapacity": 1, "degraded": true,
				"placementFinal": false, "lockInTime": "2026-05-02T09:00:00Z",
				"placements": [{"node": "n1", "gpus": [0, 1, 2, 3, 4, 5, 6, 7]}, {"node": "n2", "gpus": []}],
				"actions": [
					{"id": "ac-cb-1-2-activate", "kind": "activate", "state": "done", "attempts": 1, "lastError": "timeout",
						"createdAt": "2026-05-02T12:00:00Z", "doneAt": "2026-05-02T12:00:02Z"},
					{"id": "ac-cb-1-3-release", "kind": "release", "state": "pending", "attempts": 2, "lastError": "connection refused",
						"createdAt": "2026-05-02T13:00:00Z", "nextAttemptAt": "2026-05-02T11:00:02.0005Z"}]}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.blocks["cb-1"] = testBlock()
			fake.status = status
			a := newTestAPI(t, fake, Options{})
			checkJSON(t, a.do(t, tc.method, tc.target, tc.body), tc.wantStatus, tc.want)
			if fake.gotTeam != "default" {
				t.Errorf("team = %q, want default", fake.gotTeam)
			}
		})
	}
}

func TestBlockRoutesPassParameters(t *testing.T) {
	fake := newFake()
	fake.blocks["cb-1"] = testBlock()
	a := newTestAPI(t, fake, Options{})
	a.do(t, http.MethodGet, "/v1/blocks?state=payment-pending", "")
	if fake.gotState != core.StatePaymentPending {
		t.Errorf("state = %q", fake.gotState)
	}
	a.do(t, http.MethodGet, "/v1/blocks/cb-1/extension-offerings?durationHours=6", "")
	if fake.gotDuration != 6*time.Hour {
		t.Errorf("duration = %s", fake.gotDuration)
	}
}

func TestBlockRoutesInvalid(t *testing.T) {
	tests := map[string]struct {
		method, target, body string
		want                 wantProblem
	}{
		"unknown block": {
			method: http.MethodGet, target: "/v1/blocks/cb-9",
			want: wantProblem{http.StatusNotFound, CodeNotFound, "block cb-9: not found"},
		},
		"unknown state": {
			method: http.MethodGet, target: "/v1/blocks?state=running",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"},
		},
		"extension offerings without duration": {
			method: http.MethodGet, target: "/v1/blocks/cb-1/extension-offerings",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.durationHours"},
		},
		"extension offerings with zero duration": {
			method: http.MethodGet, target: "/v1/blocks/cb-1/extension-offerings?durationHours=0",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.durationHours"},
		},
		"extend without body": {
			method: http.MethodPost, target: "/v1/blocks/cb-1/extensions",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body is required"},
		},
		"extend with unknown field": {
			method: http.MethodPost, target: "/v1/blocks/cb-1/extensions", body: `{"offeringId": "cbe-ext.sig", "hours": 2}`,
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.hours: unexpected property"},
		},
		"extend with a bad offering": {
			method: http.MethodPost, target: "/v1/blocks/cb-1/extensions", body: `{"offeringId": "cbo-abc.sig"}`,
			want: wantProblem{http.StatusBadRequest, CodeOfferingInvalid, "extending block cb-1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.blocks["cb-1"] = testBlock()
			a := newTestAPI(t, fake, Options{})
			checkProblem(t, a.do(t, tc.method, tc.target, tc.body), tc.want)
		})
	}
}

// shorterOffering is testOffering's 43-hour alternative.
func shorterOffering() core.Offering {
	o := testOffering()
	o.ID, o.End, o.Alternative = "cbo-short.sig", o.End.Add(-5*time.Hour), true
	return o
}
