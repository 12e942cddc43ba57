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

	"capblock/internal/core"
)

// webhookFake is the fake service with webhooks: one stored webhook of
// team "default" with a short delivery log. It records what the API
// passed to it.
type webhookFake struct {
	*fakeService
	hooks      map[string]core.Webhook
	deliveries []core.Delivery

	gotTeam, gotURL, gotScope string
	gotEvents                 []string
}

func newWebhookFake() *webhookFake {
	return &webhookFake{
		fakeService: newFake(),
		hooks: map[string]core.Webhook{"wh-1": {ID: "wh-1", Team: "default", URL: "https://example.com/hook",
			Events: []string{"block.*"}, Secret: "whsec_stored", CreatedAt: t0}},
		deliveries: []core.Delivery{
			{ID: "whd-1", Webhook: "wh-1", EventID: "evt-1", EventSeq: 4, Attempt: 0, Time: t0, NextAt: t0},
			{ID: "whd-2", Webhook: "wh-1", EventID: "evt-1", EventSeq: 4, Attempt: 1, Time: t0, Error: "no answer: connection refused", NextAt: t0.Add(time.Second)},
			{ID: "whd-3", Webhook: "wh-1", EventID: "evt-1", EventSeq: 4, Attempt: 2, Time: t0.Add(time.Second), Status: 204, Done: true},
		},
	}
}

func (f *webhookFake) CreateWebhook(_ context.Context, team, url string, events []string) (core.Webhook, error) {
	f.gotTeam, f.gotURL, f.gotEvents = team, url, events
	if err := f.fail(); err != nil {
		return core.Webhook{}, err
	}
	return core.Webhook{ID: "wh-2", Team: team, URL: url, Events: events, Secret: "whsec_new", CreatedAt: t0}, nil
}

// Team answers the admin's check that the team it names exists.
func (f *webhookFake) Team(_ context.Context, _, id string) (core.Team, error) {
	return core.Team{ID: id, Name: id}, nil
}

func (f *webhookFake) ListWebhooks(_ context.Context, scope string) ([]core.Webhook, error) {
	f.gotScope = scope
	return []core.Webhook{f.hooks["wh-1"]}, f.fail()
}

func (f *webhookFake) webhook(scope, id string) (core.Webhook, error) {
	f.gotScope = scope
	if err := f.fail(); err != nil {
		return core.Webhook{}, err
	}
	w, ok := f.hooks[id]
	if !ok || (scope != "" && w.Team != scope) {
		return core.Webhook{}, fmt.Errorf("%w: webhook %s", core.ErrNotFound, id)
	}
	return w, nil
}

func (f *webhookFake) DeleteWebhook(_ context.Context, scope, id string) (core.Webhook, error) {
	return f.webhook(scope, id)
}

func (f *webhookFake) Deliveries(_ context.Context, scope, id string) ([]core.Delivery, error) {
	if _, err := f.webhook(scope, id); err != nil {
		return nil, err
	}
	return f.deliveries, nil
}

func newWebhookAPI(t *testing.T, f *webhookFake) *testAPI {
	t.Helper()
	logs := &bytes.Buffer{}
	opts := Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: prometheus.NewRegistry()}
	return &testAPI{handler: recordProblems(f, New(f, opts)), fake: f.fakeService, logs: logs, registry: opts.Registry}
}

func TestCreateWebhook(t *testing.T) {
	tests := map[string]struct {
		token, body string
		err         error
		want        string
		wantProblem *wantProblem
		wantTeam    string
	}{
		"member, for its team": {
			token: memberToken, body: `{"url": "https://example.com/h", "events": ["block.*", "plan.committed"]}`,
			want: `{"id": "wh-2", "team": "default", "url": "https://example.com/h", "events": ["block.*", "plan.committed"],
				"createdAt": "2026-05-01T10:00:00Z", "secret": "whsec_new"}`,
			wantTeam: "default",
		},
		"admin, for another team": {
			token: adminToken, body: `{"url": "http://example.com/h", "events": ["*"], "team": "default"}`,
			want: `{"id": "wh-2", "team": "default", "url": "http://example.com/h", "events": ["*"],
				"createdAt": "2026-05-01T10:00:00Z", "secret": "whsec_new"}`,
			wantTeam: "default",
		},
		"no events": {
			token: memberToken, body: `{"url": "https://example.com/h", "events": []}`,
			wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "body.events"},
		},
		"no url": {
			token: memberToken, body: `{"events": ["*"]}`,
			wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "url"},
		},
		"refused by the service": {
			token: memberToken, body: `{"url": "ftp://example.com/h", "events": ["*"]}`,
			err:         core.Invalidf("url: want an absolute http:// or https:// URL"),
			wantProblem: &wantProblem{http.StatusBadRequest, CodeInvalidArgument, "http:// or https://"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newWebhookFake()
			f.err = tc.err
			r := newWebhookAPI(t, f).doAs(t, tc.token, http.MethodPost, "/v1/webhooks", tc.body)
			if tc.wantProblem != nil {
				checkProblem(t, r, *tc.wantProblem)
				return
			}
			checkJSON(t, r, http.StatusCreated, tc.want)
			if f.gotTeam != tc.wantTeam {
				t.Errorf("team passed = %q, want %q", f.gotTeam, tc.wantTeam)
			}
		})
	}
}

func TestListWebhooksHidesSecrets(t *testing.T) {
	f := newWebhookFake()
	a := newWebhookAPI(t, f)
	checkJSON(t, a.do(t, http.MethodGet, "/v1/webhooks", ""), http.StatusOK, `{"webhooks": [
		{"id": "wh-1", "team": "default", "url": "https://example.com/hook", "events": ["block.*"], "createdAt": "2026-05-01T10:00:00Z"}]}`)
	if f.gotScope != "default" {
		t.Errorf("scope = %q, want the member's team", f.gotScope)
	}
	a.doAs(t, adminToken, http.MethodGet, "/v1/webhooks", "")
	if f.gotScope != "" {
		t.Errorf("scope of an admin = %q, want every team", f.gotScope)
	}
}

func TestDeleteWebhook(t *testing.T) {
	a := newWebhookAPI(t, newWebhookFake())
	checkJSON(t, a.do(t, http.MethodDelete, "/v1/webhooks/wh-1", ""), http.StatusOK,
		`{"id": "wh-1", "team": "default", "url": "https://example.com/hook", "events": ["block.*"], "createdAt": "2026-05-01T10:00:00Z"}`)
	checkProblem(t, a.do(t, http.MethodDelete, "/v1/webhooks/wh-9", ""), wantProblem{http.StatusNotFound, CodeNotFound, "webhook wh-9"})
}

func TestWebhookDeliveries(t *testing.T) {
	f := newWebhookFake()
	a := newWebhookAPI(t, f)
	checkJSON(t, a.do(t, http.MethodGet, "/v1/webhooks/wh-1/deliveries", ""), http.StatusOK, `{"deliveries": [
		{"id": "whd-1", "eventId": "evt-1", "attempt": 0, "time": "2026-05-01T10:00:00Z", "nextAttemptAt": "2026-05-01T10:00:00Z", "done": false},
		{"id": "whd-2", "eventId": "evt-1", "attempt": 1, "time": "2026-05-01T10:00:00Z", "error": "no answer: connection refused",
			"nextAttemptAt": "2026-05-01T10:00:01Z", "done": false},
		{"id": "whd-3", "eventId": "evt-1", "attempt": 2, "time": "2026-05-01T10:00:01Z", "statusCode": 204, "done": true}]}`)
	// Another team's webhook is not found.
	f.hooks["wh-1"] = core.Webhook{ID: "wh-1", Team: "other"}
	checkProblem(t, a.do(t, http.MethodGet, "/v1/webhooks/wh-1/deliveries", ""), wantProblem{http.StatusNotFound, CodeNotFound, "webhook wh-1"})
	if diff := cmp.Diff("default", f.gotScope); diff != "" {
		t.Errorf("scope (-want +got):\n%s", diff)
	}
}
