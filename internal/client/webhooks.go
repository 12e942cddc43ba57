package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Webhook is a URL subscribed to a team's events. Secret, the key of the
// Capblock-Signature HMAC, is only in the answer to CreateWebhook.
type Webhook struct {
	ID        string    `json:"id"`
	Team      string    `json:"team"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
	Secret    string    `json:"secret,omitempty"`
}

// NewWebhook is the body of POST /v1/webhooks. Events are event types
// (block.active), prefixes (block.*) or "*"; Team is for an admin
// subscribing another team.
type NewWebhook struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Team   string   `json:"team,omitempty"`
}

// Delivery is one line of a webhook's delivery log: the event scheduled
// (Attempt 0) or an attempt to deliver it.
type Delivery struct {
	ID            string     `json:"id"`
	EventID       string     `json:"eventId"`
	Attempt       int        `json:"attempt"`
	Time          time.Time  `json:"time"`
	StatusCode    int        `json:"statusCode,omitempty"`
	Error         string     `json:"error,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	Done          bool       `json:"done"`
}

// CreateWebhook subscribes a URL to events: POST /v1/webhooks. The answer
// holds the signing secret, which the server never shows again.
func (c *Client) CreateWebhook(ctx context.Context, w NewWebhook) (Webhook, error) {
	var out Webhook
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/webhooks", body: w}, &out); err != nil {
		return Webhook{}, wrapf(err, "creating a webhook")
	}
	return out, nil
}

// Webhooks lists every team's webhooks for an admin, one's team's
// otherwise, without their secrets: GET /v1/webhooks.
func (c *Client) Webhooks(ctx context.Context) ([]Webhook, error) {
	var out struct {
		Webhooks []Webhook `json:"webhooks"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/webhooks"}, &out); err != nil {
		return nil, wrapf(err, "listing webhooks")
	}
	return out.Webhooks, nil
}

// DeleteWebhook deletes a webhook and its delivery log, and returns what
// it was: DELETE /v1/webhooks/{id}.
func (c *Client) DeleteWebhook(ctx context.Context, id string) (Webhook, error) {
	var out Webhook
	if err := c.do(ctx, request{method: http.MethodDelete, path: webhookPath(id, "")}, &out); err != nil {
		return Webhook{}, wrapf(err, "deleting webhook %s", id)
	}
	return out, nil
}

// WebhookDeliveries returns a webhook's delivery log, oldest first: GET
// /v1/webhooks/{id}/deliveries.
func (c *Client) WebhookDeliveries(ctx context.Context, id string) ([]Delivery, error) {
	var out struct {
		Deliveries []Delivery `json:"deliveries"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: webhookPath(id, "/deliveries")}, &out); err != nil {
		return nil, wrapf(err, "getting the deliveries of webhook %s", id)
	}
	return out.Deliveries, nil
}

func webhookPath(id, suffix string) string { return "/v1/webhooks/" + url.PathEscape(id) + suffix }
