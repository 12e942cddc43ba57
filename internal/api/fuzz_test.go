package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"capblock/internal/core"
)

func (f *fakeService) PutBudget(_ context.Context, b core.Budget) (core.Budget, error) { return b, nil }

// checkFuzzAnswer fails on a server error or an error that is not a
// problem with a code: bad input must always get a clear 4xx.
func checkFuzzAnswer(t *testing.T, r response, input string) {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("input %q: status %d: %s", input, r.status, r.body)
	}
	if r.status >= 400 {
		var p Problem
		if err := json.Unmarshal(r.body, &p); err != nil || p.Code == "" || p.Detail == "" {
			t.Fatalf("input %q: status %d without a problem: %s", input, r.status, r.body)
		}
	}
}

// FuzzOfferingsQuery sends arbitrary times and durations to the search.
func FuzzOfferingsQuery(f *testing.F) {
	f.Add("2026-12-01T00:00:00Z", "2026-12-15T00:00:00Z", "48")
	f.Add("tomorrow", "2026-12-15", "0")
	f.Add("2026-12-01T00:00:00.999999999+14:00", "9999-12-31T23:59:59Z", "99999999999999999999")
	f.Add("", "", "-1")
	a := newTestAPI(f, newFake(), Options{})
	f.Fuzz(func(t *testing.T, after, before, hours string) {
		q := url.Values{"instanceType": {"h100.8x"}, "instanceCount": {"1"}, "durationHours": {hours}, "startAfter": {after}, "endBefore": {before}}
		checkFuzzAnswer(t, a.do(t, http.MethodGet, "/v1/offerings?"+q.Encode(), ""), q.Encode())
	})
}

// FuzzBudgetBody sends arbitrary bodies to the budget, which carries money.
func FuzzBudgetBody(f *testing.F) {
	f.Add(`{"amount":{"amount":"1000.00","currency":"USD"},"period":"month"}`)
	f.Add(`{"amount":{"amount":"1e9","currency":"USD"},"period":"month"}`)
	f.Add(`{"amount":{"amount":"-0.01","currency":"usd"},"period":"week"}`)
	f.Add(`{"amount":{"amount":"92233720368547758.08","currency":"USD"},"period":"total"}`)
	f.Add(`{"amount":1000}`)
	fake := newFake()
	a := newTestAPI(f, fake, Options{})
	f.Fuzz(func(t *testing.T, body string) {
		checkFuzzAnswer(t, a.doAs(t, adminToken, http.MethodPut, "/v1/teams/team-1/budget", body), body)
	})
}

// FuzzClockBody sends arbitrary bodies to the simulated clock, which
// carries a time or a duration.
func FuzzClockBody(f *testing.F) {
	f.Add(`{"advance":"6h"}`)
	f.Add(`{"now":"2026-12-01T00:00:00Z"}`)
	f.Add(`{"advance":"-1h"}`)
	f.Add(`{"advance":"9223372036854775807ns"}`)
	f.Add(`{"now":"0000-01-01T00:00:00Z","advance":"1h"}`)
	fake := newFake()
	fake.clock = &fakeClock{}
	a := newTestAPI(f, fake, Options{})
	f.Fuzz(func(t *testing.T, body string) {
		checkFuzzAnswer(t, a.do(t, http.MethodPost, "/v1/admin/clock", body), body)
	})
}
