package client

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWebhookCalls(t *testing.T) {
	created := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	next := created.Add(2 * time.Second)
	tests := map[string]struct {
		status   int
		body     string
		call     func(context.Context, *Client) (any, error)
		want     any
		wantSeen seen
	}{
		"create": {
			status: http.StatusCreated,
			body: `{"id": "wh-1", "team": "team-1", "url": "https://example.com/h", "events": ["block.*"],
				"createdAt": "2026-11-01T00:00:00Z", "secret": "whsec_abc"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWebhook(ctx, NewWebhook{URL: "https://example.com/h", Events: []string{"block.*"}})
			},
			want: Webhook{ID: "wh-1", Team: "team-1", URL: "https://example.com/h", Events: []string{"block.*"},
				CreatedAt: created, Secret: "whsec_abc"},
			wantSeen: seen{Method: "POST", Path: "/v1/webhooks", Body: `{"url":"https://example.com/h","events":["block.*"]}`},
		},
		"create for another team": {
			status: http.StatusCreated,
			body:   `{"id": "wh-2", "team": "team-2", "url": "https://example.com/h", "events": ["*"], "createdAt": "2026-11-01T00:00:00Z", "secret": "s"}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateWebhook(ctx, NewWebhook{URL: "https://example.com/h", Events: []string{"*"}, Team: "team-2"})
			},
			want:     Webhook{ID: "wh-2", Team: "team-2", URL: "https://example.com/h", Events: []string{"*"}, CreatedAt: created, Secret: "s"},
			wantSeen: seen{Method: "POST", Path: "/v1/webhooks", Body: `{"url":"https://example.com/h","events":["*"],"team":"team-2"}`},
		},
		"list": {
			status:   http.StatusOK,
			body:     `{"webhooks": [{"id": "wh-1", "team": "team-1", "url": "https://example.com/h", "events": ["block.*"], "createdAt": "2026-11-01T00:00:00Z"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Webhooks(ctx) },
			want:     []Webhook{{ID: "wh-1", Team: "team-1", URL: "https://example.com/h", Events: []string{"block.*"}, CreatedAt: created}},
			wantSeen: seen{Method: "GET", Path: "/v1/webhooks"},
		},
		"delete": {
			status:   http.StatusOK,
			body:     `{"id": "a/b", "team": "team-1", "url": "https://example.com/h", "events": ["*"], "createdAt": "2026-11-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.DeleteWebhook(ctx, "a/b") },
			want:     Webhook{ID: "a/b", Team: "team-1", URL: "https://example.com/h", Events: []string{"*"}, CreatedAt: created},
			wantSeen: seen{Method: "DELETE", Path: "/v1/webhooks/a%2Fb"},
		},
		"deliveries": {
			status: http.StatusOK,
			body: `{"deliveries": [
				{"id": "whd-1", "eventId": "evt-1", "attempt": 1, "time": "2026-11-01T00:00:00Z", "statusCode": 500, "error": "answered 500 Internal Server Error", "nextAttemptAt": "2026-11-01T00:00:02Z", "done": false},
				{"id": "whd-2", "eventId": "evt-1", "attempt": 2, "time": "2026-11-01T00:00:02Z", "statusCode": 200, "done": true}]}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.WebhookDeliveries(ctx, "wh-1") },
			want: []Delivery{
				{ID: "whd-1", EventID: "evt-1", Attempt: 1, Time: created, StatusCode: 500, Error: "answered 500 Internal Server Error", NextAttemptAt: &next},
				{ID: "whd-2", EventID: "evt-1", Attempt: 2, Time: next, StatusCode: 200, Done: true},
			},
			wantSeen: seen{Method: "GET", Path: "/v1/webhooks/wh-1/deliveries"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, got := fakeAPI(t, tc.status, tc.body)
			v, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Errorf("decoded mismatch (-want +got):\n%s", diff)
			}
			tc.wantSeen.Auth = "Bearer tok"
			if diff := cmp.Diff(tc.wantSeen, *got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
