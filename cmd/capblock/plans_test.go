package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	planOffering1 = `{"offeringId": "tpo-first", "target": "training-job", "durationHours": 48,
		"upfrontFee": {"amount": "14105.28", "currency": "USD"}, "onDemandFee": {"amount": "18877.44", "currency": "USD"},
		"expiresAt": "2026-11-20T09:40:00Z", "segments": [
		{"instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-11-21T00:00:00Z",
		 "endTime": "2026-11-22T00:00:00Z", "durationHours": 24, "upfrontFee": {"amount": "7078.08", "currency": "USD"}},
		{"instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-11-22T12:00:00Z",
		 "endTime": "2026-11-23T12:00:00Z", "durationHours": 24, "upfrontFee": {"amount": "7027.20", "currency": "USD"}}]}`
	planOffering2 = `{"offeringId": "tpo-second", "target": "training-job", "durationHours": 48,
		"upfrontFee": {"amount": "13875.84", "currency": "USD"}, "onDemandFee": {"amount": "18877.44", "currency": "USD"},
		"expiresAt": "2026-11-20T09:40:00Z", "segments": [
		{"instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-b", "startTime": "2026-11-24T00:00:00Z",
		 "endTime": "2026-11-26T00:00:00Z", "durationHours": 48, "upfrontFee": {"amount": "13875.84", "currency": "USD"}}]}`
	plan1 = `{"id": "tp-1", "name": "llama", "team": "ml", "target": "training-job", "state": "scheduled",
		"segments": [
		{"blockId": "cb-1", "instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-11-21T00:00:00Z",
		 "endTime": "2026-11-22T00:00:00Z", "durationHours": 24, "state": "scheduled"},
		{"blockId": "cb-2", "instanceType": "h100.8x", "instanceCount": 4, "zone": "zone-a", "startTime": "2026-11-22T12:00:00Z",
		 "endTime": "2026-11-23T12:00:00Z", "durationHours": 24, "state": "scheduled"}],
		"upfrontFee": {"amount": "14105.28", "currency": "USD"}, "createdAt": "2026-11-20T09:30:00Z",
		"total": 4, "available": 0, "inUse": 0, "unhealthy": 0}`
)

// planAPI serves canned plan answers and records the requests.
type planAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func newPlanAPI(t *testing.T) *planAPI {
	t.Helper()
	p := &planAPI{}
	mux := http.NewServeMux()
	reply := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/plan-offerings", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("instanceType") == "b200.8x" {
			reply(200, `{"planOfferings": []}`)(w, r)
			return
		}
		reply(200, `{"planOfferings": [`+planOffering1+`, `+planOffering2+`]}`)(w, r)
	})
	mux.HandleFunc("POST /v1/plans", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(p.last(), "tpo-gone") {
			problem(w, http.StatusConflict, "no_capacity", "segment 2 of the plan: only 3 of 4 h100.8x free")
			return
		}
		if strings.Contains(p.last(), "tpo-used") {
			problem(w, http.StatusConflict, "offering_used", "offering already used: this quote already bought a plan (a quote buys one); "+
				"search again for a new quote, or repeat the first purchase's clientToken to get its plan")
			return
		}
		reply(201, plan1)(w, r)
	})
	mux.HandleFunc("GET /v1/plans", reply(200, `{"plans": [`+plan1+`]}`))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Capblock-Now", serverNow.Format(time.RFC3339))
		reply(200, `{"status": "ok"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/plans/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "tp-1" {
			problem(w, http.StatusNotFound, "not_found", "plan "+r.PathValue("id")+" not found")
			return
		}
		reply(200, plan1)(w, r)
	})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		line := r.Method + " " + r.URL.RequestURI()
		if len(body) > 0 {
			line += " " + string(body)
		}
		p.mu.Lock()
		p.requests = append(p.requests, line)
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *planAPI) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[len(p.requests)-1]
}

func (p *planAPI) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.requests...)
}

func TestPlanCommands(t *testing.T) {
	showPlan1 := lines(
		"id:          tp-1",
		"name:        llama",
		"team:        ml",
		"target:      training-job",
		"state:       scheduled",
		"capacity:    4 total, 0 available, 0 in use, 0 unhealthy",
		"upfront fee: 14105.28 USD",
		"created:     2026-11-20 09:30 UTC",
		"",
		"#  BLOCK  STATE      TYPE     COUNT  ZONE    START (UTC)       END (UTC)         HOURS",
		"1  cb-1   scheduled  h100.8x  4      zone-a  2026-11-21 00:00  2026-11-22 00:00  24",
		"2  cb-2   scheduled  h100.8x  4      zone-a  2026-11-22 12:00  2026-11-23 12:00  24",
	)
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string
	}{
		"offerings": {
			args: []string{"plans", "offerings", "-o", "wide", "--type", "h100.8x", "--count", "4", "--duration", "2d", "--start-after", "tomorrow", "--end-before", "+7d"},
			want: result{
				stdout: lines(
					"#  TYPE     COUNT  ZONE    START (UTC)       END (UTC)         HOURS  SEGMENTS           FEE           ON-DEMAND     SAVINGS  OFFERING ID",
					"1  h100.8x  4      zone-a  2026-11-21 00:00  2026-11-23 12:00  48     24h, 12h gap, 24h  14105.28 USD  18877.44 USD  25%      tpo-first",
					"2  h100.8x  4      zone-b  2026-11-24 00:00  2026-11-26 00:00  48     48h                13875.84 USD  18877.44 USD  26%      tpo-second",
				),
				stderr: "buy one with: capblock plans buy ROW, e.g. capblock plans buy 1 (quotes expire at 2026-11-20 09:40 UTC)\n",
			},
			// Relative dates are read from the server's clock, a day ahead of this machine's.
			wantRequests: []string{"GET /healthz", "GET /v1/plan-offerings?durationHours=48&endBefore=2026-11-28T09%3A30%3A00Z&instanceCount=4&instanceType=h100.8x&maxSegments=2&startAfter=2026-11-22T00%3A00%3A00Z"},
		},
		"offerings: four segments, a zone, a target, default window": {
			args: []string{"plans", "offerings", "--type", "h100.8x", "--duration", "1w", "--max-segments", "4", "--zone", "zone-a", "--target", "cluster", "--max-results", "3"},
			want: result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /healthz", "GET /v1/plan-offerings?durationHours=168&endBefore=2026-12-12T09%3A30%3A00Z&instanceCount=1&instanceType=h100.8x" +
				"&maxResults=3&maxSegments=4&startAfter=2026-11-21T09%3A30%3A00Z&target=cluster&zone=zone-a"},
		},
		"offerings: nothing fits": {
			args: []string{"plans", "offerings", "--type", "b200.8x", "--duration", "48h"},
			want: result{stderr: "no plan fits: try a wider window (--start-after/--end-before), more --max-segments, a smaller --count or another --zone\n"},
		},
		"offerings: no duration": {
			args: []string{"plans", "offerings", "--type", "h100.8x"},
			want: result{code: 2, stderr: "capblock: give the plan's total --duration, e.g. 72h or 2w (see 'capblock plans offerings --help')\n"},
		},
		"offerings: too many segments": {
			args: []string{"plans", "offerings", "--type", "h100.8x", "--duration", "48h", "--max-segments", "5"},
			want: result{code: 2, stderr: "capblock: --max-segments 5: a plan has 1 to 4 segments (see 'capblock plans offerings --help')\n"},
		},
		"buy": {
			args: []string{"plans", "buy", "tpo-first", "--name", "llama", "--client-token", "tok-1"},
			want: result{stdout: showPlan1,
				stderr: "client token: tok-1 (to retry this purchase safely, pass --client-token tok-1)\n"},
			wantRequests: []string{`POST /v1/plans {"offeringId":"tpo-first","clientToken":"tok-1","name":"llama"}`},
		},
		"buy: for a team": {
			args:         []string{"plans", "buy", "tpo-first", "--client-token", "tok-2", "--team", "team-1"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{`POST /v1/plans {"offeringId":"tpo-first","clientToken":"tok-2","team":"team-1"}`},
		},
		"buy: a segment is gone": {
			args: []string{"plans", "buy", "tpo-gone", "--client-token", "tok-3"},
			want: result{code: 1, stderr: "capblock: no_capacity: segment 2 of the plan: only 3 of 4 h100.8x free; search again for other times, zones or counts\n"},
		},
		"buy: the quote bought already": {
			args: []string{"plans", "buy", "tpo-used", "--client-token", "tok-4"},
			want: result{code: 1, stderr: "capblock: offering_used: this quote already bought a plan (a quote buys one); " +
				"search again for a new quote, or repeat the first purchase's --client-token to get its plan\n"},
		},
		"buy: no offering": {
			args: []string{"plans", "buy"},
			want: result{code: 2, stderr: "capblock: capblock plans buy needs the row number or plan offering id (from 'capblock plans offerings') (see 'capblock plans buy --help')\n"},
		},
		"list": {
			args: []string{"plans", "list"},
			want: result{stdout: lines(
				"ID    NAME   STATE      INSTANCES    SEGMENTS  START (UTC)       END (UTC)         HOURS  FEE",
				"tp-1  llama  scheduled  4 × h100.8x  2         2026-11-21 00:00  2026-11-23 12:00  48     14105.28 USD",
			)},
			wantRequests: []string{"GET /v1/plans"},
		},
		"show": {
			args:         []string{"plans", "show", "tp-1"},
			want:         result{stdout: showPlan1},
			wantRequests: []string{"GET /v1/plans/tp-1"},
		},
		"show: not found": {
			args: []string{"plans", "show", "tp-9"},
			want: result{code: 1, stderr: "capblock: not_found: plan tp-9 not found\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newPlanAPI(t)
			checkRun(t, api.URL, api.seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}

// TestPlanJSONOutput: -o json prints the API's JSON; a purchase adds its
// client token.
func TestPlanJSONOutput(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"offerings": {args: []string{"plans", "offerings", "--type", "h100.8x", "--duration", "48h"},
			want: `{"planOfferings": [` + planOffering1 + `, ` + planOffering2 + `]}`},
		"empty offerings are an empty list": {args: []string{"plans", "offerings", "--type", "b200.8x", "--duration", "48h"},
			want: `{"planOfferings": []}`},
		"list": {args: []string{"plans", "list"}, want: `{"plans": [` + plan1 + `]}`},
		"show": {args: []string{"plans", "show", "tp-1"}, want: plan1},
		"buy":  {args: []string{"plans", "buy", "tpo-first", "--client-token", "tok-9"}, want: strings.Replace(plan1, `"id": "tp-1",`, `"id": "tp-1", "clientToken": "tok-9",`, 1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newPlanAPI(t)
			got := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "json"}, tc.args...)...)
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			var gotJSON, wantJSON any
			if err := json.Unmarshal([]byte(got.stdout), &gotJSON); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
			}
			if err := json.Unmarshal([]byte(tc.want), &wantJSON); err != nil {
				t.Fatalf("bad test JSON: %v", err)
			}
			if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
				t.Errorf("JSON mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
