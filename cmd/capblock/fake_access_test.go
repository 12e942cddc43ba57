package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Canned answers of the "Teams and access" routes.
const (
	teamOps      = `{"id": "team-0", "name": "ops", "createdAt": "2026-10-01T00:00:00Z"}`
	teamResearch = `{"id": "team-1", "name": "research", "createdAt": "2026-11-01T00:00:00Z"}`
	userRoot     = `{"id": "usr-1", "name": "root", "team": "team-0", "role": "admin", "createdAt": "2026-10-01T00:00:00Z"}`
	userAda      = `{"id": "usr-2", "name": "ada", "team": "team-1", "role": "member", "createdAt": "2026-11-01T00:00:00Z"}`
	tokenRoot    = `{"id": "tok-1", "user": "usr-1", "createdAt": "2026-10-01T00:00:00Z"}`
	tokenAda     = `{"id": "tok-2", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-12-01T00:00:00Z"}`
	tokenAdaOld  = `{"id": "tok-3", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-11-10T00:00:00Z"}`
	quotasJSON   = `{"quotas": [
		{"maxInstancesPerBlock": 0, "maxInstancesHeld": 16, "maxDurationHours": 72, "maxLeadDays": 28},
		{"instanceType": "h100.8x", "maxInstancesPerBlock": 4, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0}]}`
	ledgerJSON = `{"entries": [
		{"id": "jr-1.0", "journalId": "jr-1", "seq": 1, "time": "2026-11-20T10:00:00Z", "kind": "charge", "amount": {"amount": "7078.08", "currency": "USD"}, "subject": "cb-1"},
		{"id": "jr-2.1", "journalId": "jr-2", "seq": 2, "time": "2026-11-20T11:00:00Z", "kind": "refund", "amount": {"amount": "3.00", "currency": "USD"}, "subject": "cb-2"},
		{"id": "jr-3.3", "journalId": "jr-3", "seq": 3, "time": "2026-11-20T12:00:00Z", "kind": "credit", "amount": {"amount": "50.00", "currency": "USD"}, "subject": "cb-1"}],
		"spent": {"amount": "7075.08", "currency": "USD"},
		"gross": {"amount": "7078.08", "currency": "USD"}, "refunds": {"amount": "3.00", "currency": "USD"},
		"credits": {"amount": "50.00", "currency": "USD"}, "net": {"amount": "7025.08", "currency": "USD"}, "budget": {"amount": {"amount": "10000.00", "currency": "USD"}, "period": "month"}}`
	auditJSON = `{"records": [
		{"seq": 7, "time": "2026-11-20T10:00:00Z", "user": "usr-1", "team": "team-0", "tokenId": "tok-1", "method": "POST", "route": "/v1/teams", "status": 201, "outcome": "ok"},
		{"seq": 8, "time": "2026-11-20T10:05:00Z", "user": "usr-2", "team": "team-1", "tokenId": "tok-2", "method": "POST", "route": "/v1/blocks", "status": 409, "outcome": "no_capacity"}],
		"next": "8"}`
	spendJSON = `{"rows": [
		{"team": "team-1", "instanceType": "h100.8x", "month": "2026-11",
		 "gross": {"amount": "7078.08", "currency": "USD"}, "refunds": {"amount": "0.00", "currency": "USD"},
		 "credits": {"amount": "50.00", "currency": "USD"}, "net": {"amount": "7028.08", "currency": "USD"},
		 "spent": {"amount": "7078.08", "currency": "USD"},
		 "onDemand": {"amount": "9438.72", "currency": "USD"}, "savings": {"amount": "2360.64", "currency": "USD"},
		 "gpuHours": {"reserved": 768, "used": 600.5, "lent": 0, "idle": 167.5}},
		{"team": "team-1", "instanceType": "l4.1x", "month": "2026-12",
		 "gross": {"amount": "3.00", "currency": "USD"}, "refunds": {"amount": "0.00", "currency": "USD"},
		 "credits": {"amount": "0.00", "currency": "USD"}, "net": {"amount": "3.00", "currency": "USD"},
		 "spent": {"amount": "3.00", "currency": "USD"},
		 "onDemand": {"amount": "4.00", "currency": "USD"}, "savings": {"amount": "1.00", "currency": "USD"},
		 "gpuHours": {"reserved": 0, "used": 0, "lent": 0, "idle": 0}}],
		"total": {"gross": {"amount": "7081.08", "currency": "USD"}, "refunds": {"amount": "0.00", "currency": "USD"},
		 "credits": {"amount": "50.00", "currency": "USD"}, "net": {"amount": "7031.08", "currency": "USD"},
		 "spent": {"amount": "7081.08", "currency": "USD"}, "onDemand": {"amount": "9442.72", "currency": "USD"}, "savings": {"amount": "2361.64", "currency": "USD"},
		 "gpuHours": {"reserved": 768, "used": 600.5, "lent": 0, "idle": 167.5}}}`
	// newTokenSecret is what the fake answers to a token's creation.
	newTokenSecret = "cbt_NEWTOKENNEWTOKENNEWTOKENNEWTOKENNEWTOKENNEA"
)

// accessRoutes serves teams, users, tokens, quotas, budgets, the ledger,
// the audit log and spend.
func (f *fakeAPI) accessRoutes(mux *http.ServeMux) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	ok := func(body string) http.HandlerFunc { return answer(http.StatusOK, body) }
	// echo answers the request's own body, as PUT routes do.
	echo := func(w http.ResponseWriter, r *http.Request) { ok(f.lastBody())(w, r) }
	body := func() map[string]string {
		var m map[string]string
		json.NewDecoder(strings.NewReader(f.lastBody())).Decode(&m)
		return m
	}

	mux.HandleFunc("POST /v1/teams", func(w http.ResponseWriter, r *http.Request) {
		answer(http.StatusCreated, `{"id": "team-2", "name": "`+body()["name"]+`", "createdAt": "2026-11-20T09:30:00Z"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/teams", ok(`{"teams": [`+teamOps+`, `+teamResearch+`]}`))
	mux.HandleFunc("GET /v1/teams/{id}", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("id") {
		case "team-0":
			ok(teamOps)(w, r)
		case "team-1":
			ok(teamResearch)(w, r)
		default:
			problem(w, http.StatusNotFound, "not_found", "team "+r.PathValue("id")+" not found")
		}
	})
	mux.HandleFunc("GET /v1/teams/{id}/quotas", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "team-0" {
			ok(`{"quotas": []}`)(w, r)
			return
		}
		ok(quotasJSON)(w, r)
	})
	mux.HandleFunc("PUT /v1/teams/{id}/quotas", echo)
	mux.HandleFunc("PUT /v1/teams/{id}/budget", echo)
	mux.HandleFunc("GET /v1/teams/{id}/ledger", ok(ledgerJSON))
	mux.HandleFunc("POST /v1/users", func(w http.ResponseWriter, r *http.Request) {
		b := body()
		answer(http.StatusCreated, `{"id": "usr-3", "name": "`+b["name"]+`", "team": "`+b["team"]+`", "role": "`+b["role"]+`", "createdAt": "2026-11-20T09:30:00Z"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/users", ok(`{"users": [`+userRoot+`, `+userAda+`]}`))
	mux.HandleFunc("GET /v1/whoami", ok(`{"user": `+userRoot+`, "tokenId": "tok-1"}`))
	mux.HandleFunc("POST /v1/users/{id}/tokens", func(w http.ResponseWriter, r *http.Request) {
		expires := ""
		if body()["expiresIn"] != "" {
			expires = `"expiresAt": "2026-12-20T09:30:00Z", `
		}
		answer(http.StatusCreated, `{"id": "tok-9", "user": "`+r.PathValue("id")+`", "createdAt": "2026-11-20T09:30:00Z", `+expires+`"token": "`+newTokenSecret+`"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/tokens", ok(`{"tokens": [`+tokenRoot+`, `+tokenAda+`, `+tokenAdaOld+`]}`))
	mux.HandleFunc("DELETE /v1/tokens/{id}", func(w http.ResponseWriter, r *http.Request) {
		ok(`{"id": "`+r.PathValue("id")+`", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-11-20T09:30:00Z"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/audit", ok(auditJSON))
	mux.HandleFunc("GET /v1/spend", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("team") == "team-0" {
			ok(`{"rows": [], "total": {"spent": {"amount": "0.00", "currency": "USD"}, "onDemand": {"amount": "0.00", "currency": "USD"}, "savings": {"amount": "0.00", "currency": "USD"}}}`)(w, r)
			return
		}
		ok(spendJSON)(w, r)
	})
}
