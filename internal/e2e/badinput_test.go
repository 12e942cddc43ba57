package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBadInput sends the bad requests a user makes to the real stack: each
// gets problem+json with its stable code, and what was stored before is
// still there unchanged.
func TestBadInput(t *testing.T) {
	e := start(t)
	s := t0.Add(2 * time.Hour)
	o := e.exact(searchQuery("h100.8x", 1, 4, s, s.Add(48*time.Hour)), 4, s)
	before, _ := e.buy(o.OfferingID, "keep")

	q := func(typ string, count, hours int, after, before time.Time) string {
		return "/v1/offerings?" + searchQuery(typ, count, hours, after, before)
	}
	tests := map[string]struct {
		method, path, body string
		status             int
		code               string
	}{
		"unknown type":            {"GET", q("h200.8x", 1, 4, s, s.Add(48*time.Hour)), "", 400, "invalid_argument"},
		"count zero":              {"GET", q("h100.8x", 0, 4, s, s.Add(48*time.Hour)), "", 400, "invalid_argument"},
		"count above the limit":   {"GET", q("h100.8x", 65, 4, s, s.Add(48*time.Hour)), "", 400, "invalid_argument"},
		"duration zero":           {"GET", q("h100.8x", 1, 0, s, s.Add(48*time.Hour)), "", 400, "invalid_argument"},
		"duration above 182 days": {"GET", q("h100.8x", 1, 4369, s, s.Add(5000*time.Hour)), "", 400, "invalid_argument"},
		"window in the past":      {"GET", q("h100.8x", 1, 4, t0.Add(-72*time.Hour), t0.Add(-24*time.Hour)), "", 400, "invalid_argument"},
		"beyond the horizon":      {"GET", q("h100.8x", 1, 4, t0.Add(9*7*24*time.Hour), t0.Add(10*7*24*time.Hour)), "", 400, "invalid_argument"},
		"end before start":        {"GET", q("h100.8x", 1, 4, s.Add(48*time.Hour), s), "", 400, "invalid_argument"},
		"malformed time":          {"GET", "/v1/offerings?instanceType=h100.8x&instanceCount=1&durationHours=4&startAfter=tomorrow&endBefore=2026-12-09T00:00:00Z", "", 400, "invalid_argument"},
		"unknown zone":            {"GET", q("h100.8x", 1, 4, s, s.Add(48*time.Hour)) + "&zone=zone-z", "", 400, "invalid_argument"},
		"unknown field":           {"POST", "/v1/blocks", `{"offeringId":"` + o.OfferingID + `","clientToken":"u1","colour":"red"}`, 400, "invalid_argument"},
		"malformed JSON":          {"POST", "/v1/blocks", `{"offeringId":`, 400, "invalid_argument"},
		"missing client token":    {"POST", "/v1/blocks", `{"offeringId":"` + o.OfferingID + `"}`, 400, "invalid_argument"},
		"oversized body":          {"POST", "/v1/blocks", `{"offeringId":"` + strings.Repeat("x", 2<<20) + `","clientToken":"u2"}`, 413, "invalid_argument"},
		"forged offering":         {"POST", "/v1/blocks", `{"offeringId":"cbo-AAAA","clientToken":"u3"}`, 400, "offering_invalid"},
		"unknown block":           {"GET", "/v1/blocks/cb-00000000000000000", "", 404, "not_found"},
		"cancel unknown block":    {"POST", "/v1/blocks/cb-00000000000000000/cancel", "", 404, "not_found"},
		"bad state filter":        {"GET", "/v1/blocks?state=sleeping", "", 400, "invalid_argument"},
		"bad event cursor":        {"GET", "/v1/events?after=abc", "", 400, "invalid_argument"},
		"clock backwards":         {"POST", "/v1/admin/clock", `{"now":"2020-01-01T00:00:00Z"}`, 400, "invalid_argument"},
		"unknown route":           {"GET", "/v1/nothing", "", 404, "not_found"},
		"series: unknown zone": {"POST", "/v1/series-offerings", `{"instanceType":"l4.1x","instanceCount":1,"daysOfWeek":["mon"],` +
			`"startTime":"09:00","endTime":"17:00","timeZone":"Mars/Olympus","fromDate":"2026-12-07","weeks":1}`, 400, "invalid_argument"},
		"series: bad day": {"POST", "/v1/series-offerings", `{"instanceType":"l4.1x","instanceCount":1,"daysOfWeek":["funday"],` +
			`"startTime":"09:00","endTime":"17:00","timeZone":"UTC","fromDate":"2026-12-07","weeks":1}`, 400, "invalid_argument"},
		"series: both toDate and weeks": {"POST", "/v1/series-offerings", `{"instanceType":"l4.1x","instanceCount":1,"daysOfWeek":["mon"],` +
			`"startTime":"09:00","endTime":"17:00","timeZone":"UTC","fromDate":"2026-12-07","toDate":"2026-12-08","weeks":1}`, 400, "invalid_argument"},
		"series: forged offering":   {"POST", "/v1/series", `{"offeringId":"cso-AAAA","clientToken":"s1"}`, 400, "offering_invalid"},
		"series: a plan's offering": {"POST", "/v1/series", `{"offeringId":"tpo-AAAA","clientToken":"s2"}`, 400, "offering_invalid"},
		"series: unknown":           {"GET", "/v1/series/cs-00000000000000000", "", 404, "not_found"},
		"order: buy without maxFee": {"POST", "/v1/orders", `{"mode":"buy","instanceType":"h100.8x","instanceCount":1,"durationHours":4,` +
			`"startAfter":"` + ts(s) + `","endBefore":"` + ts(s.Add(48*time.Hour)) + `"}`, 400, "invalid_argument"},
		"order: bad mode": {"POST", "/v1/orders", `{"mode":"maybe","instanceType":"h100.8x","instanceCount":1,"durationHours":4,` +
			`"startAfter":"` + ts(s) + `","endBefore":"` + ts(s.Add(48*time.Hour)) + `"}`, 400, "invalid_argument"},
		"order: window in the past": {"POST", "/v1/orders", `{"instanceType":"h100.8x","instanceCount":1,"durationHours":4,` +
			`"startAfter":"` + ts(t0.Add(-72*time.Hour)) + `","endBefore":"` + ts(t0.Add(-24*time.Hour)) + `"}`, 400, "invalid_argument"},
		"order: unknown":        {"GET", "/v1/orders/ord-00000000000000000", "", 404, "not_found"},
		"order: cancel unknown": {"POST", "/v1/orders/ord-00000000000000000/cancel", "", 404, "not_found"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.url+tc.path, bytes.NewReader([]byte(tc.body)))
			req.Header.Set("Content-Type", "application/json")
			tok, _ := tokens.Load(e.url)
			req.Header.Set("Authorization", "Bearer "+tok.(string))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var p problem
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("not JSON: %q", data)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
			if resp.StatusCode != tc.status || p.Code != tc.code || p.Detail == "" {
				t.Errorf("status %d code %q detail %q, want %d %q with a detail", resp.StatusCode, p.Code, p.Detail, tc.status, tc.code)
			}
		})
	}
	var after block
	call(t, e.url, "GET", "/v1/blocks/"+before.ID, nil, &after)
	if after != before {
		t.Fatalf("the stored block changed: %+v, was %+v", after, before)
	}
	if n := liveBlocks(t, e.db); n != 1 {
		t.Fatalf("%d live blocks, want only the one bought before", n)
	}
	var orders struct{ Orders []order }
	var series struct{ Series []series }
	call(t, e.url, "GET", "/v1/orders", nil, &orders)
	call(t, e.url, "GET", "/v1/series", nil, &series)
	if len(orders.Orders) != 0 || len(series.Series) != 0 {
		t.Fatalf("bad input stored %d orders and %d series", len(orders.Orders), len(series.Series))
	}
}
