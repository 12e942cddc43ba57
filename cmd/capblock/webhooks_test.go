package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

const (
	webhook1 = `{"id": "wh-1", "team": "team-1", "url": "https://example.com/capblock", "events": ["block.*", "plan.committed"],
		"createdAt": "2026-11-20T09:30:00Z"}`
	webhook2 = `{"id": "wh-2", "team": "team-0", "url": "http://10.0.0.7:9000/in", "events": ["*"], "createdAt": "2026-11-21T00:00:00Z"}`
)

// webhookRoutes serves the webhooks and their delivery logs.
func (f *fakeAPI) webhookRoutes(mux *http.ServeMux) {
	answer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("POST /v1/webhooks", func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(f.lastBody(), "ftp://") {
			problem(w, http.StatusBadRequest, "invalid_argument", "url: want an absolute http:// or https:// URL")
			return
		}
		answer(http.StatusCreated, `{"id": "wh-3", "team": "team-1", "url": "https://example.com/capblock",
			"events": ["block.*"], "createdAt": "2026-11-20T09:30:00Z", "secret": "whsec_shown-once"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/webhooks", answer(http.StatusOK, `{"webhooks": [`+webhook1+`, `+webhook2+`]}`))
	mux.HandleFunc("DELETE /v1/webhooks/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "wh-1" {
			problem(w, http.StatusNotFound, "not_found", "webhook "+r.PathValue("id")+" not found")
			return
		}
		answer(http.StatusOK, webhook1)(w, r)
	})
	mux.HandleFunc("GET /v1/webhooks/{id}/deliveries", answer(http.StatusOK, `{"deliveries": [
		{"id": "whd-1", "eventId": "evt-1", "attempt": 0, "time": "2026-12-01T00:00:00Z", "nextAttemptAt": "2026-12-01T00:00:00Z", "done": false},
		{"id": "whd-2", "eventId": "evt-1", "attempt": 1, "time": "2026-12-01T00:00:00Z", "statusCode": 500,
			"error": "answered 500 Internal Server Error", "nextAttemptAt": "2026-12-01T00:00:01Z", "done": false},
		{"id": "whd-3", "eventId": "evt-1", "attempt": 2, "time": "2026-12-01T00:00:01Z", "statusCode": 204, "done": true},
		{"id": "whd-4", "eventId": "evt-2", "attempt": 1, "time": "2026-12-01T00:00:02Z", "error": "no answer: connection refused",
			"nextAttemptAt": "2026-12-01T00:00:03Z", "done": false}]}`))
}

func TestWebhookCommands(t *testing.T) {
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string
	}{
		"create": {
			args: []string{"webhooks", "create", "https://example.com/capblock", "--event", "block.*"},
			want: result{
				stdout: lines(
					"secret: whsec_shown-once",
					"id:     wh-3",
					"team:   team-1",
					"url:    https://example.com/capblock",
					"events: block.*",
				),
				stderr: "the secret is shown only now: give it to the receiver, which checks each delivery's Capblock-Signature with it; see deliveries with 'capblock webhooks deliveries wh-3'\n",
			},
			wantRequests: []string{`POST /v1/webhooks {"url":"https://example.com/capblock","events":["block.*"]}`},
		},
		"create with several events for another team": {
			args: []string{"webhooks", "create", "https://example.com/capblock", "--event", "block.active", "--event", "job.*", "--team", "team-2"},
			want: result{stdout: "*", stderr: "the secret is shown only now*"},
			wantRequests: []string{
				`POST /v1/webhooks {"url":"https://example.com/capblock","events":["block.active","job.*"],"team":"team-2"}`,
			},
		},
		"create: refused URL": {
			args: []string{"webhooks", "create", "ftp://example.com/x", "--event", "*"},
			want: result{code: 1, stderr: "capblock: invalid_argument: url: want an absolute http:// or https:// URL\n"},
		},
		"create: no URL": {
			args: []string{"webhooks", "create", "--event", "*"},
			want: result{code: 2, stderr: "capblock: capblock webhooks create needs the receiver's URL (http:// or https://) (see 'capblock webhooks create --help')\n"},
		},
		"create: no event": {
			args: []string{"webhooks", "create", "https://example.com/capblock"},
			want: result{code: 2, stderr: `capblock: required flag(s) "event" not set (see 'capblock webhooks create --help')` + "\n"},
		},
		"list": {
			args: []string{"webhooks", "list"},
			want: result{stdout: lines(
				"ID    TEAM    EVENTS                  CREATED (UTC)     URL",
				"wh-1  team-1  block.*,plan.committed  2026-11-20 09:30  https://example.com/capblock",
				"wh-2  team-0  *                       2026-11-21 00:00  http://10.0.0.7:9000/in",
			)},
			wantRequests: []string{"GET /v1/webhooks"},
		},
		"delete": {
			args: []string{"webhooks", "delete", "wh-1", "--yes"},
			want: result{stderr: lines(
				"deleting webhook wh-1 (team team-1, https://example.com/capblock, events block.*,plan.committed): its delivery log goes with it, and deliveries not yet made are dropped",
				"deleted webhook wh-1 (https://example.com/capblock)",
			)},
			wantRequests: []string{"GET /v1/webhooks", "DELETE /v1/webhooks/wh-1"},
		},
		"delete: not found": {
			args: []string{"webhooks", "delete", "wh-9", "--yes"},
			want: result{code: 1, stderr: lines(
				"deleting webhook wh-9: its delivery log goes with it, and deliveries not yet made are dropped",
				"capblock: not_found: webhook wh-9 not found",
			)},
		},
		"delete: no id": {
			args: []string{"webhooks", "delete"},
			want: result{code: 2, stderr: "capblock: capblock webhooks delete needs the webhook id (from 'capblock webhooks list') (see 'capblock webhooks delete --help')\n"},
		},
		"deliveries": {
			args: []string{"webhooks", "deliveries", "wh-1"},
			want: result{stdout: lines(
				"EVENT  ATTEMPT  TIME (UTC)           RESULT                              NEXT ATTEMPT (UTC)",
				"evt-1  0        2026-12-01 00:00:00  scheduled                           2026-12-01 00:00:00",
				"evt-1  1        2026-12-01 00:00:00  answered 500 Internal Server Error  2026-12-01 00:00:01",
				"evt-1  2        2026-12-01 00:00:01  delivered (204)                     -",
				"evt-2  1        2026-12-01 00:00:02  no answer: connection refused       2026-12-01 00:00:03",
			)},
			wantRequests: []string{"GET /v1/webhooks/wh-1/deliveries"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			checkRun(t, api.URL, api.seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}

// TestWebhookCommandsJSON checks that -o json prints the API's JSON, the
// secret included once.
func TestWebhookCommandsJSON(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"create": {
			args: []string{"webhooks", "create", "https://example.com/capblock", "--event", "block.*"},
			want: `{"id": "wh-3", "team": "team-1", "url": "https://example.com/capblock", "events": ["block.*"],
				"createdAt": "2026-11-20T09:30:00Z", "secret": "whsec_shown-once"}`,
		},
		"list": {
			args: []string{"webhooks", "list"},
			want: `{"webhooks": [` + webhook1 + `, ` + webhook2 + `]}`,
		},
		"delete": {
			args: []string{"webhooks", "delete", "wh-1", "--yes"},
			want: webhook1,
		},
		"deliveries": {
			args: []string{"webhooks", "deliveries", "wh-1"},
			want: `{"deliveries": [
				{"id": "whd-1", "eventId": "evt-1", "attempt": 0, "time": "2026-12-01T00:00:00Z", "nextAttemptAt": "2026-12-01T00:00:00Z", "done": false},
				{"id": "whd-2", "eventId": "evt-1", "attempt": 1, "time": "2026-12-01T00:00:00Z", "statusCode": 500,
					"error": "answered 500 Internal Server Error", "nextAttemptAt": "2026-12-01T00:00:01Z", "done": false},
				{"id": "whd-3", "eventId": "evt-1", "attempt": 2, "time": "2026-12-01T00:00:01Z", "statusCode": 204, "done": true},
				{"id": "whd-4", "eventId": "evt-2", "attempt": 1, "time": "2026-12-01T00:00:02Z", "error": "no answer: connection refused",
					"nextAttemptAt": "2026-12-01T00:00:03Z", "done": false}]}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			got := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "json"}, tc.args...)...)
			if got.code != 0 {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			assertJSON(t, tc.want, got.stdout)
		})
	}
}
