package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

func TestProbes(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	checkJSON(t, a.do(t, http.MethodGet, "/healthz", ""), http.StatusOK, `{"status": "ok"}`)
	checkJSON(t, a.do(t, http.MethodGet, "/readyz", ""), http.StatusOK, `{"status": "ok"}`)

	fake := newFake()
	fake.ready = errors.New("dial tcp 10.0.0.5:5432: connection refused")
	a = newTestAPI(t, fake, Options{})
	r := a.do(t, http.MethodGet, "/readyz", "")
	checkProblem(t, r, wantProblem{http.StatusServiceUnavailable, CodeInternal, "not ready"})
	if strings.Contains(string(r.body), "10.0.0.5") || !strings.Contains(a.logs.String(), "connection refused") {
		t.Errorf("the cause should be logged, not answered: body %s, logs %s", r.body, a.logs)
	}
}

func TestMetrics(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	a.do(t, http.MethodGet, "/v1/blocks/cb-404", "")
	a.do(t, http.MethodGet, "/v1/blocks/cb-404", "")
	a.do(t, http.MethodGet, "/nowhere", "")
	r := a.do(t, http.MethodGet, "/metrics", "")
	if r.status != http.StatusOK {
		t.Fatalf("status = %d", r.status)
	}
	for _, want := range []string{
		`capblock_http_requests_total{code="404",method="GET",route="/v1/blocks/{id}"} 2`,
		`capblock_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`capblock_http_request_duration_seconds_count{code="404",method="GET",route="/v1/blocks/{id}"} 2`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %s:\n%s", want, r.body)
		}
	}
}

func TestSharedRegistry(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	// A second handler on the same registry reuses the metrics.
	b := newTestAPI(t, newFake(), Options{Registry: a.registry})
	a.do(t, http.MethodGet, "/healthz", "")
	b.do(t, http.MethodGet, "/healthz", "")
	r := b.do(t, http.MethodGet, "/metrics", "")
	if want := `capblock_http_requests_total{code="200",method="GET",route="/healthz"} 2`; !strings.Contains(string(r.body), want) {
		t.Errorf("metrics lack %s:\n%s", want, r.body)
	}
}

func TestRequestLog(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	a.do(t, http.MethodPost, "/v1/blocks", `{"offeringId": "cbo-abc.sig", "clientToken": "secret-token"}`)
	var line map[string]any
	if err := json.Unmarshal(a.logs.Bytes(), &line); err != nil {
		t.Fatalf("log is not one JSON line: %v\n%s", err, a.logs)
	}
	for key, want := range map[string]any{"msg": "http request", "method": "POST", "route": "/v1/blocks", "status": 201.0} {
		if line[key] != want {
			t.Errorf("log %s = %v, want %v", key, line[key], want)
		}
	}
	if _, ok := line["duration"]; !ok {
		t.Errorf("log lacks duration: %v", line)
	}
	if strings.Contains(a.logs.String(), "secret-token") {
		t.Errorf("the body is logged: %s", a.logs)
	}
}

func TestOpenAPI(t *testing.T) {
	tests := map[string]struct {
		clock     *fakeClock
		wantClock bool
	}{
		"wall clock": {},
		"sim clock":  {clock: &fakeClock{now: t0}, wantClock: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.clock = tc.clock
			a := newTestAPI(t, fake, Options{})
			r := a.do(t, http.MethodGet, "/openapi.json", "")
			if r.status != http.StatusOK {
				t.Fatalf("status = %d", r.status)
			}
			var doc struct {
				OpenAPI string `json:"openapi"`
				Info    struct {
					Title, Version string
				}
				Paths      map[string]map[string]json.RawMessage
				Components struct {
					Schemas map[string]json.RawMessage
				}
			}
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if doc.OpenAPI != "3.1.0" || doc.Info.Title != "capblock" || doc.Info.Version != "v1" {
				t.Errorf("openapi %q, info %+v", doc.OpenAPI, doc.Info)
			}
			var got []string
			for path, ops := range doc.Paths {
				for method := range ops {
					got = append(got, strings.ToUpper(method)+" "+path)
				}
			}
			slices.Sort(got)
			want := []string{
				"GET /healthz",
				"GET /readyz",
				"GET /v1/availability",
				"GET /v1/blocks",
				"GET /v1/blocks/{id}",
				"GET /v1/blocks/{id}/extension-offerings",
				"GET /v1/blocks/{id}/status",
				"GET /v1/events",
				"GET /v1/webhooks",
				"POST /v1/webhooks",
				"DELETE /v1/webhooks/{id}",
				"GET /v1/webhooks/{id}/deliveries",
				"GET /v1/instance-types",
				"GET /v1/nodes",
				"GET /v1/offerings",
				"GET /v1/plan-offerings",
				"GET /v1/plans",
				"GET /v1/plans/{id}",
				"POST /v1/plans/{id}/cancel",
				"GET /v1/policy",
				"POST /v1/plans",
				"POST /v1/series-offerings",
				"POST /v1/series",
				"GET /v1/series",
				"GET /v1/series/{id}",
				"POST /v1/series/{id}/cancel",
				"POST /v1/orders",
				"GET /v1/orders",
				"GET /v1/orders/{id}",
				"POST /v1/orders/{id}/cancel",
				"POST /v1/blocks",
				"POST /v1/blocks/{id}/cancel",
				"POST /v1/blocks/{id}/approve",
				"POST /v1/blocks/{id}/extensions",
				"POST /v1/blocks/{id}/transfer",
				"POST /v1/blocks/{id}/release",
				"POST /v1/blocks/{id}/lending",
				"GET /v1/utilisation",
				"GET /v1/audit",
				"GET /v1/teams",
				"GET /v1/teams/{id}",
				"GET /v1/teams/{id}/ledger",
				"GET /v1/teams/{id}/quotas",
				"GET /v1/tokens",
				"GET /v1/spend",
				"GET /v1/users",
				"GET /v1/whoami",
				"POST /v1/teams",
				"POST /v1/users",
				"POST /v1/teams/{id}/disable",
				"POST /v1/teams/{id}/enable",
				"POST /v1/users/{id}/disable",
				"POST /v1/users/{id}/enable",
				"POST /v1/users/{id}/tokens",
				"PUT /v1/teams/{id}/budget",
				"PUT /v1/teams/{id}/quotas",
				"DELETE /v1/tokens/{id}",
				"POST /v1/users/{id}/access-keys",
				"GET /v1/access-keys",
				"DELETE /v1/access-keys/{id}",
				"POST /v1/admin/nodes/{name}/fail",
				"POST /v1/jobs",
				"GET /v1/jobs",
				"GET /v1/jobs/{id}",
				"GET /v1/jobs/{id}/logs",
				"POST /v1/jobs/{id}/stop",
				"POST /v1/admin/nodes/{name}/recover",
				"GET /v1/offerings/price-calendar",
				"GET /v1/fleet-calendar",
				"GET /v1/blocks/{id}/cancel-quote",
			}
			slices.Sort(want)
			if tc.wantClock {
				want = append(want, "GET /v1/admin/clock", "POST /v1/admin/clock")
				slices.Sort(want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
			for _, schema := range []string{"Block", "Offering", "Money", "Problem"} {
				if _, ok := doc.Components.Schemas[schema]; !ok {
					t.Errorf("no schema %s", schema)
				}
			}
			if !strings.Contains(string(doc.Paths["/v1/blocks"]["post"]), `"200"`) {
				t.Errorf("POST /v1/blocks does not document the 200 replay: %s", doc.Paths["/v1/blocks"]["post"])
			}
		})
	}
}

func TestNoSchemaLinksInBodies(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	r := a.do(t, http.MethodGet, "/healthz", "")
	if strings.Contains(string(r.body), "$schema") || r.header.Get("Link") != "" {
		t.Errorf("huma's schema links leak into responses: %s %v", r.body, r.header)
	}
	for _, path := range []string{"/docs", "/schemas/Block.json"} {
		if r := a.do(t, http.MethodGet, path, ""); r.status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, r.status)
		}
	}
}

func TestClock(t *testing.T) {
	tests := map[string]struct {
		method, body string
		wantStatus   int
		want         string
		wantProblem  *wantProblem
	}{
		"get":           {method: http.MethodGet, wantStatus: http.StatusOK, want: `{"now": "2026-05-01T10:00:00Z"}`},
		"advance":       {method: http.MethodPost, body: `{"advance": "6h30m"}`, wantStatus: http.StatusOK, want: `{"now": "2026-05-01T16:30:00Z"}`},
		"set":           {method: http.MethodPost, body: `{"now": "2026-05-03T00:00:00+02:00"}`, wantStatus: http.StatusOK, want: `{"now": "2026-05-02T22:00:00Z"}`},
		"set backwards": {method: http.MethodPost, body: `{"now": "2026-04-01T00:00:00Z"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "cannot go back"}},
		"both":          {method: http.MethodPost, body: `{"advance": "1h", "now": "2026-05-03T00:00:00Z"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "not both"}},
		"neither":       {method: http.MethodPost, body: `{}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "give advance or now"}},
		"bad duration":  {method: http.MethodPost, body: `{"advance": "6 hours"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.advance"}},
		"negative":      {method: http.MethodPost, body: `{"advance": "-1h"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.advance"}},
		"bad time":      {method: http.MethodPost, body: `{"now": "May 3"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.now"}},
		"unknown field": {method: http.MethodPost, body: `{"advance": "1h", "by": "admin"}`, wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.by: unexpected property"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fake := newFake()
			fake.clock = &fakeClock{now: t0}
			a := newTestAPI(t, fake, Options{})
			r := a.do(t, tc.method, "/v1/admin/clock", tc.body)
			if tc.wantProblem != nil {
				checkProblem(t, r, *tc.wantProblem)
				return
			}
			checkJSON(t, r, tc.wantStatus, tc.want)
		})
	}
}

func TestEvents(t *testing.T) {
	fake := newFake()
	fake.events = []core.Event{
		{ID: "evt-1", Seq: 1, Time: t0, Type: "block.scheduled", Subject: "cb-1", Team: "default",
			Data: map[string]any{"state": "scheduled"}},
		{ID: "evt-2", Seq: 2, Time: t0.Add(time.Hour).In(time.FixedZone("X", 3600)), Type: "block.active", Subject: "cb-1", Team: "default"},
	}
	a := newTestAPI(t, fake, Options{})
	checkJSON(t, a.do(t, http.MethodGet, "/v1/events?after=c-1&wait=30s", ""), http.StatusOK, `{"events": [
		{"id": "evt-1", "time": "2026-05-01T10:00:00Z", "type": "block.scheduled", "subject": "cb-1", "team": "default", "data": {"state": "scheduled"}},
		{"id": "evt-2", "time": "2026-05-01T11:00:00Z", "type": "block.active", "subject": "cb-1", "team": "default", "data": {}}],
		"next": "c-2"}`)
	if fake.gotAfter != "c-1" || fake.gotWait != 30*time.Second || fake.gotTeam != "default" {
		t.Errorf("after %q, wait %s, team %q", fake.gotAfter, fake.gotWait, fake.gotTeam)
	}

	a.do(t, http.MethodGet, "/v1/events", "")
	if fake.gotAfter != "" || fake.gotWait != 0 {
		t.Errorf("defaults: after %q, wait %s", fake.gotAfter, fake.gotWait)
	}
}

func TestEventsInvalid(t *testing.T) {
	tests := map[string]struct {
		query string
		want  string
	}{
		"wait above 60s": {"wait=61s", "query.wait: expected a duration <= 1m0s"},
		"negative wait":  {"wait=-1s", "query.wait: expected a duration >= 0s"},
		"wait in words":  {"wait=soon", "query.wait: expected a duration such as"},
		"bare number":    {"wait=30", "query.wait"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			checkProblem(t, a.do(t, http.MethodGet, "/v1/events?"+tc.query, ""),
				wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.want})
		})
	}
}
