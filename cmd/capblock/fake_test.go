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
)

// serverNow is the fake server's clock, which it tells in Capblock-Now: a
// day after the clock of the machine the CLI runs on (testNow), so that a
// relative time read from the wrong clock shows.
var serverNow = testNow.Add(24 * time.Hour)

// fakeAPI serves canned API.md JSON and records what it was asked.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string // "METHOD /path?query body"
	auths    []string // the Authorization header of each request
	// polled is signalled when a follow-up long poll (after=c2) arrives.
	polled chan struct{}
	// bought is the body of each purchase by its client token, as the
	// server keeps it for idempotency.
	bought map[string]string
	// extended is set once cb-1 was extended: it is read as extended
	// from then on.
	extended bool
}

const (
	offering1 = `{"offeringId": "cbo-first", "instanceType": "h100.8x", "instanceCount": 2, "zone": "zone-a",
		"startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z", "durationHours": 48,
		"upfrontFee": {"amount": "7078.08", "currency": "USD"}, "onDemandFee": {"amount": "9438.72", "currency": "USD"},
		"expiresAt": "2026-11-20T10:10:00Z", "alternative": false}`
	offering2 = `{"offeringId": "cbo-second", "instanceType": "h100.8x", "instanceCount": 2, "zone": "zone-b",
		"startTime": "2026-12-02T00:00:00Z", "endTime": "2026-12-04T01:00:00Z", "durationHours": 49,
		"upfrontFee": {"amount": "9438.72", "currency": "USD"}, "onDemandFee": {"amount": "9635.36", "currency": "USD"},
		"expiresAt": "2026-11-20T10:10:00Z", "alternative": true}`
	extension = `{"offeringId": "cbe-ext", "instanceType": "h100.8x", "instanceCount": 2, "zone": "zone-a",
		"startTime": "2026-12-03T00:00:00Z", "endTime": "2026-12-04T00:00:00Z", "durationHours": 24,
		"upfrontFee": {"amount": "3539.04", "currency": "USD"}, "onDemandFee": {"amount": "4719.36", "currency": "USD"},
		"expiresAt": "2026-11-20T10:10:00Z"}`
	block1 = `{"id": "cb-1", "name": "load-test", "team": "ml", "instanceType": "h100.8x", "gpuModel": "H100",
		"instanceCount": 2, "zone": "zone-a", "startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z",
		"durationHours": 48, "state": "scheduled", "upfrontFee": {"amount": "7078.08", "currency": "USD"},
		"createdAt": "2026-11-20T10:00:00Z", "tags": {"env": "prod"}}`
	block1Extended = `{"id": "cb-1", "name": "load-test", "team": "ml", "instanceType": "h100.8x", "gpuModel": "H100",
		"instanceCount": 2, "zone": "zone-a", "startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-04T00:00:00Z",
		"durationHours": 72, "state": "scheduled", "upfrontFee": {"amount": "10617.12", "currency": "USD"},
		"createdAt": "2026-11-20T10:00:00Z", "tags": {"env": "prod"}}`
	block2 = `{"id": "cb-2", "name": "", "team": "ml", "instanceType": "l4.1x", "gpuModel": "L4",
		"instanceCount": 1, "zone": "zone-b", "startTime": "2026-11-20T12:00:00Z", "endTime": "2026-11-20T16:00:00Z",
		"durationHours": 4, "state": "active", "upfrontFee": {"amount": "3.00", "currency": "USD"},
		"createdAt": "2026-11-20T10:00:00Z", "tags": {}}`
)

func problem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail})
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{polled: make(chan struct{}, 1), bought: map[string]string{}}
	mux := http.NewServeMux()
	reply := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodPost && r.URL.Path == "/v1/blocks" {
				w.WriteHeader(http.StatusCreated)
			}
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/instance-types", reply(`{"instanceTypes": [
		{"name": "h100.8x", "gpuModel": "H100", "gpusPerInstance": 8, "onDemandPrice": {"amount": "98.32", "currency": "USD"}, "zones": ["zone-a", "zone-b"],
			"awsNames": ["p5.48xlarge", "ml.p5.48xlarge"]},
		{"name": "l4.1x", "gpuModel": "L4", "gpusPerInstance": 1, "onDemandPrice": {"amount": "1.00", "currency": "USD"}, "zones": ["zone-b"]}]}`))
	// Not the default policy: the CLI must say what the operator set.
	mux.HandleFunc("GET /v1/blocks/{id}/cancel-quote", func(w http.ResponseWriter, r *http.Request) {
		refund := "3539.04" // 50% of cb-1's fee before its start
		if r.PathValue("id") == "cb-2" {
			refund = "0.00" // started: nothing after the start
		}
		reply(`{"refund": {"amount": "`+refund+`", "currency": "USD"}}`)(w, r)
	})
	mux.HandleFunc("GET /v1/policy", reply(`{"refundBeforeStartPercent": 50, "refundAfterStartPercent": 0, "approvalDeadlineSeconds": 600}`))
	mux.HandleFunc("GET /v1/nodes", reply(`{"nodes": [
		{"name": "a-h100-01", "zone": "zone-a", "rack": "a-r1", "gpuModel": "H100", "gpus": 8, "health": "healthy", "labels": {"fabric": "ib"}},
		{"name": "b-l4-01", "zone": "zone-b", "rack": "b-r7", "gpuModel": "L4", "gpus": 4, "health": "unhealthy", "labels": {}}]}`))
	mux.HandleFunc("GET /v1/offerings", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("instanceCount") == "0":
			problem(w, http.StatusBadRequest, "invalid_argument", "query.instanceCount: expected number >= 1")
			return
		case r.URL.Query().Get("zone") == "zone-z":
			problem(w, http.StatusBadRequest, "invalid_argument", "invalid argument: endBefore 2026-11-21T00:00:00Z must be after startAfter 2026-11-22T00:00:00Z")
			return
		}
		switch r.URL.Query().Get("instanceType") {
		case "bogus":
			problem(w, http.StatusBadRequest, "invalid_argument", `searching offerings: invalid argument: unknown instance type "bogus" (GET /v1/instance-types lists them)`)
			return
		case "b200.8x":
			reply(`{"offerings": []}`)(w, r)
			return
		case "l4.1x": // a quote that has expired by the time it is bought
			reply(`{"offerings": [`+strings.Replace(offering1, "cbo-first", "cbo-stale", 1)+`]}`)(w, r)
			return
		}
		reply(`{"offerings": [`+offering1+`, `+offering2+`]}`)(w, r)
	})
	mux.HandleFunc("POST /v1/blocks", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ OfferingID, ClientToken string }
		json.NewDecoder(strings.NewReader(f.lastBody())).Decode(&body)
		f.mu.Lock()
		first, seen := f.bought[body.ClientToken]
		if !seen {
			f.bought[body.ClientToken] = f.lastBodyLocked()
		}
		f.mu.Unlock()
		switch {
		case seen && first != f.lastBody():
			problem(w, http.StatusConflict, "idempotency_mismatch", `client token reused with other parameters: client token "`+
				body.ClientToken+`" was used for cb-1 with other parameters; use a new token for a new purchase`)
			return
		case seen:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, block1) // 200: the same block, not bought again
			return
		}
		switch body.OfferingID {
		case "cbo-budget":
			problem(w, http.StatusPaymentRequired, "budget_exceeded", "storing block cb-never: budget exceeded: team ml would have spent "+
				"10000.01 of 10000.00 USD since 2026-11-01T00:00:00Z (2921.93 USD before this change)")
			return
		case "cbo-gone":
			problem(w, http.StatusConflict, "no_capacity", "only 1 of 2 h100.8x free from 2026-12-01T00:00:00Z")
			return
		case "cbo-stale":
			problem(w, http.StatusGone, "offering_expired", "offering expired: the quote expired at 2026-11-20T10:10:00Z")
			return
		case "cbo-used":
			problem(w, http.StatusConflict, "offering_used", "offering already used: this quote already bought a block (a quote buys one); "+
				"search again for a new quote, or repeat the first purchase's clientToken to get its block")
			return
		}
		reply(block1)(w, r)
	})
	mux.HandleFunc("GET /v1/blocks", reply(`{"blocks": [`+block1+`, `+block2+`]}`))
	mux.HandleFunc("GET /v1/blocks/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "cb-1":
			f.mu.Lock()
			b := block1
			if f.extended {
				b = block1Extended
			}
			f.mu.Unlock()
			reply(b)(w, r)
		case "cb-2":
			reply(block2)(w, r)
		default:
			problem(w, http.StatusNotFound, "not_found", "block "+r.PathValue("id")+" not found")
		}
	})
	mux.HandleFunc("GET /v1/blocks/{id}/status", reply(`{"totalCapacity": 2, "availableCapacity": 1,
		"unavailableCapacity": 1, "degraded": true, "placementFinal": false, "lockInTime": "2026-11-30T23:00:00Z",
		"placements": [{"node": "a-h100-01", "gpus": [0,1,2,3,4,5,6,7]}, {"node": "a-h100-02", "gpus": [0,1,2,3,5]}]}`))
	mux.HandleFunc("POST /v1/blocks/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "cb-2" {
			reply(strings.Replace(block2, `"active"`, `"cancelled"`, 1))(w, r)
			return
		}
		reply(strings.Replace(block1, `"scheduled"`, `"cancelled"`, 1))(w, r)
	})
	mux.HandleFunc("GET /v1/blocks/{id}/extension-offerings", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("durationHours") == "999" {
			reply(`{"offerings": []}`)(w, r)
			return
		}
		reply(`{"offerings": [`+extension+`]}`)(w, r)
	})
	mux.HandleFunc("POST /v1/blocks/{id}/extensions", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(f.lastBody(), "cbe-used") {
			problem(w, http.StatusConflict, "offering_used", "offering already used: this extension offering already extended block "+
				r.PathValue("id")+" (an extension offering extends once); ask for a fresh one")
			return
		}
		f.mu.Lock()
		f.extended = true
		f.mu.Unlock()
		reply(block1Extended)(w, r)
	})
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") == "c2" {
			f.polled <- struct{}{}
			<-r.Context().Done() // a long poll with nothing new
			return
		}
		reply(`{"events": [
			{"id": "evt-1", "time": "2026-12-01T00:00:00Z", "type": "block.active", "subject": "cb-1", "team": "ml", "data": {"zone": "zone-a"}},
			{"id": "evt-2", "time": "2026-12-02T23:20:00Z", "type": "block.expiration-warning", "subject": "cb-1", "team": "ml", "data": {}}],
			"next": "c2"}`)(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Capblock-Now", serverNow.Format(time.RFC3339))
		reply(`{"status": "ok"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/admin/clock", reply(`{"now": "2026-12-01T00:00:00Z"}`))
	mux.HandleFunc("POST /v1/admin/clock", reply(`{"now": "2026-12-01T06:00:00Z"}`))
	f.accessRoutes(mux)
	f.webhookRoutes(mux)
	f.destructiveRoutes(mux)

	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		line := r.Method + " " + r.URL.RequestURI()
		if len(body) > 0 {
			line += " " + string(body)
		}
		f.mu.Lock()
		f.requests = append(f.requests, line)
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) lastBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastBodyLocked()
}

func (f *fakeAPI) lastBodyLocked() string {
	last := f.requests[len(f.requests)-1]
	if i := strings.Index(last, " {"); i >= 0 {
		return last[i+1:]
	}
	return ""
}

func (f *fakeAPI) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.requests...)
}

func (f *fakeAPI) seenAuth() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}
