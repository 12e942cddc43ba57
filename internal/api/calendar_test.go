package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/console"
	"capblock/internal/core"
)

func (f *fakeService) PriceCalendar(_ context.Context, req core.SearchRequest) ([]core.PriceStart, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.gotSearch = req
	f.mu.Unlock()
	usd := func(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }
	return []core.PriceStart{
		{Start: t0.Add(time.Hour), Zone: "zone-a", Fee: usd(120000), OnDemandFee: usd(236400), Available: true},
		{Start: t0.Add(2 * time.Hour), Zone: "zone-b", Fee: usd(110000), OnDemandFee: usd(236400), Available: false},
	}, nil
}

func (f *fakeService) FleetCalendar(_ context.Context, scope string, from time.Time, hours int) ([]core.PoolCalendar, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.gotTeam = scope
	f.gotAvail = []any{from, hours}
	f.mu.Unlock()
	b := testBlock()
	b.Placements = []core.Placement{{Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}
	return []core.PoolCalendar{{GPUModel: "H100", Zone: "zone-a", Nodes: 2, GPUs: 16,
		Free: []int32{8, 0}, Own: []int32{8, 8}, Taken: []int32{0, 8}, Blocks: []core.Block{b},
		Unhealthy: []core.Node{{Name: "n2", Rack: "r2", GPUs: 8}}}}, nil
}

func (f *fakeService) CancelQuote(_ context.Context, team, id string) (core.Money, error) {
	if err := f.fail(); err != nil {
		return core.Money{}, err
	}
	f.mu.Lock()
	f.gotTeam = team
	f.mu.Unlock()
	if id != "cb-1" {
		return core.Money{}, fmt.Errorf("block %s: %w", id, core.ErrNotFound)
	}
	return core.Money{Minor: 123456, Currency: "USD"}, nil
}

func TestPriceCalendarRoute(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	r := a.do(t, http.MethodGet, "/v1/offerings/price-calendar?instanceType=h100.8x&instanceCount=2&durationHours=12&startAfter=2026-05-01T10:00:00Z&endBefore=2026-05-03T10:00:00Z&zone=zone-a", "")
	checkJSON(t, r, http.StatusOK, `{"starts":[
		{"start":"2026-05-01T11:00:00Z","zone":"zone-a","fee":{"amount":"1200.00","currency":"USD"},"onDemandFee":{"amount":"2364.00","currency":"USD"},"available":true},
		{"start":"2026-05-01T12:00:00Z","zone":"zone-b","fee":{"amount":"1100.00","currency":"USD"},"onDemandFee":{"amount":"2364.00","currency":"USD"},"available":false}]}`)
	want := core.SearchRequest{Types: []string{"h100.8x"}, Count: 2, Duration: 12 * time.Hour, Zone: "zone-a", Team: "default",
		StartAfter: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), EndBefore: time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, a.fake.gotSearch); diff != "" {
		t.Errorf("search request (-want +got):\n%s", diff)
	}
}

func TestPriceCalendarRouteRefuses(t *testing.T) {
	base := "/v1/offerings/price-calendar?instanceType=h100.8x&instanceCount=2&durationHours=12"
	tests := map[string]struct {
		target string
		detail string
	}{
		"no window":       {base, "startAfter"},
		"window backward": {base + "&startAfter=2026-05-03T10:00:00Z&endBefore=2026-05-01T10:00:00Z", "endBefore must be after startAfter"},
		"no duration":     {"/v1/offerings/price-calendar?instanceType=h100.8x&instanceCount=2&startAfter=2026-05-01T10:00:00Z&endBefore=2026-05-03T10:00:00Z", "durationHours"},
		"zero count":      {strings.Replace(base, "instanceCount=2", "instanceCount=0", 1) + "&startAfter=2026-05-01T10:00:00Z&endBefore=2026-05-03T10:00:00Z", "instanceCount"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			checkProblem(t, a.do(t, http.MethodGet, tc.target, ""), wantProblem{http.StatusBadRequest, CodeInvalidArgument, tc.detail})
		})
	}
}

func TestFleetCalendarRoute(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	r := a.do(t, http.MethodGet, "/v1/fleet-calendar?from=2026-05-01T10:30:00Z&hours=2", "")
	checkJSON(t, r, http.StatusOK, `{"from":"2026-05-01T10:00:00Z","hours":2,"pools":[{"gpuModel":"H100","zone":"zone-a","nodes":2,"gpus":16,
		"free":[8,0],"own":[8,8],"taken":[0,8],
		"blocks":[{"id":"cb-1","name":"load test","team":"default","instanceType":"h100.8x","instanceCount":2,"gpus":8,
			"startTime":"2026-05-02T10:00:00Z","endTime":"2026-05-04T10:00:00Z","state":"scheduled"}],
		"unhealthy":[{"name":"n2","rack":"r2","gpus":8}]}]}`)
	// A member's calendar is scoped to its team: others' blocks are counts.
	if a.fake.gotTeam != "default" {
		t.Errorf("scope = %q, want the member's team", a.fake.gotTeam)
	}
	if diff := cmp.Diff([]any{time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), 2}, a.fake.gotAvail); diff != "" {
		t.Errorf("from, hours (-want +got):\n%s", diff)
	}
	r = a.doAs(t, adminToken, http.MethodGet, "/v1/fleet-calendar", "")
	if r.status != http.StatusOK || a.fake.gotTeam != "" || a.fake.gotAvail[1] != 1344 {
		t.Errorf("admin: %d, scope %q, hours %v; want 200, every team, 1344 hours", r.status, a.fake.gotTeam, a.fake.gotAvail[1])
	}
	checkProblem(t, a.do(t, http.MethodGet, "/v1/fleet-calendar?hours=5000", ""), wantProblem{http.StatusBadRequest, CodeInvalidArgument, "hours"})
}

func TestCancelQuoteRoute(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{})
	checkJSON(t, a.do(t, http.MethodGet, "/v1/blocks/cb-1/cancel-quote", ""), http.StatusOK, `{"refund":{"amount":"1234.56","currency":"USD"}}`)
	if a.fake.gotTeam != "default" {
		t.Errorf("scope = %q, want the member's team", a.fake.gotTeam)
	}
	checkProblem(t, a.do(t, http.MethodGet, "/v1/blocks/cb-9/cancel-quote", ""), wantProblem{http.StatusNotFound, CodeNotFound, "cb-9"})
}

// TestConsoleRouting: the console answers pages and its files; the API's
// routes keep precedence and its misses stay problems.
func TestConsoleRouting(t *testing.T) {
	a := newTestAPI(t, newFake(), Options{Console: console.Handler()})
	get := func(method, target, accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		a.handler.ServeHTTP(rec, req)
		return rec
	}
	html := "text/html,application/xhtml+xml,*/*;q=0.8"
	for _, target := range []string{"/", "/calendar", "/blocks/cb-1", "/find?x=1"} {
		rec := get(http.MethodGet, target, html)
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") || !strings.Contains(rec.Body.String(), `src="/app.js"`) {
			t.Errorf("GET %s (a page): %d %s CSP %q", target, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Content-Security-Policy"))
		}
	}
	if rec := get(http.MethodGet, "/app.js", "*/*"); rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") ||
		rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("ETag") == "" {
		t.Errorf("GET /app.js: %d %v", rec.Code, rec.Header())
	}
	// The API's own.
	for _, tc := range []struct{ method, target, accept, code string }{
		{http.MethodGet, "/v1/nothing", html, CodeNotFound},
		{http.MethodGet, "/v1/offerings/price-calendar/x", html, CodeNotFound},
		{http.MethodGet, "/calendar", "application/json", CodeNotFound},
		{http.MethodGet, "/nothing.js", "*/*", CodeNotFound},
		{http.MethodPost, "/calendar", html, CodeNotFound},
	} {
		rec := get(tc.method, tc.target, tc.accept)
		if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != problemJSON || !strings.Contains(rec.Body.String(), tc.code) {
			t.Errorf("%s %s (Accept %s): %d %s %s, want a 404 problem", tc.method, tc.target, tc.accept, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	if rec := get(http.MethodGet, "/healthz", html); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "<html") {
		t.Errorf("GET /healthz went to the console: %d %s", rec.Code, rec.Body)
	}
}
