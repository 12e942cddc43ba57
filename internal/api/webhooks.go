package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/core"
)

// registerWebhooks declares the webhooks: a team's subscriptions to its
// events, delivered as signed POSTs, and their delivery logs.
func (s *server) registerWebhooks(api huma.API) {
	create := s.operation("createWebhook", http.MethodPost, "/v1/webhooks", "webhooks",
		"Subscribe a URL to the team's events; the signing secret is shown this once")
	create.DefaultStatus = http.StatusCreated
	huma.Register(api, create, s.createWebhook)
	huma.Register(api, s.operation("listWebhooks", http.MethodGet, "/v1/webhooks", "webhooks",
		"List webhooks (never their secrets): every team's for an admin, one's team's otherwise"), s.listWebhooks)
	huma.Register(api, s.operation("deleteWebhook", http.MethodDelete, "/v1/webhooks/{id}", "webhooks",
		"Delete a webhook and its delivery log, at once; its queued deliveries are dropped"), s.deleteWebhook)
	huma.Register(api, s.operation("listWebhookDeliveries", http.MethodGet, "/v1/webhooks/{id}/deliveries", "webhooks",
		"A webhook's delivery log, oldest first: each event scheduled (attempt 0) and each attempt to deliver it"), s.listWebhookDeliveries)
}

type webhookJSON struct {
	ID        string    `json:"id" example:"wh-0a1b2c3d4e5f6a7b8"`
	Team      string    `json:"team"`
	URL       string    `json:"url" example:"https://example.com/capblock-events"`
	Events    []string  `json:"events" nullable:"false"`
	CreatedAt time.Time `json:"createdAt"`
	Secret    string    `json:"secret,omitempty" doc:"The key of the Capblock-Signature HMAC; only in the answer to the creation."`
}

func toWebhook(w core.Webhook) webhookJSON {
	return webhookJSON{ID: w.ID, Team: w.Team, URL: w.URL, Events: w.Events, CreatedAt: w.CreatedAt.UTC()}
}

type createWebhookInput struct {
	Body struct {
		URL    string   `json:"url" minLength:"1" maxLength:"2048" doc:"Where to POST the events: an http:// or https:// URL."`
		Events []string `json:"events" minItems:"1" maxItems:"32" doc:"Event types (block.active), prefixes (block.*, plan.*, job.*) or * for all."`
		Team   string   `json:"team,omitempty" maxLength:"64" doc:"An admin subscribing another team names it here (its id)."`
	}
}

func (s *server) createWebhook(ctx context.Context, in *createWebhookInput) (*out[webhookJSON], error) {
	team := s.teamFor(ctx, in.Body.Team)
	w, err := s.svc.CreateWebhook(ctx, team, in.Body.URL, in.Body.Events)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := toWebhook(w)
	resp.Secret = w.Secret
	return reply(resp)
}

type webhooksJSON struct {
	Webhooks []webhookJSON `json:"webhooks" nullable:"false"`
}

func (s *server) listWebhooks(ctx context.Context, _ *struct{}) (*out[webhooksJSON], error) {
	ws, err := s.svc.ListWebhooks(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := webhooksJSON{Webhooks: make([]webhookJSON, 0, len(ws))}
	for _, w := range ws {
		resp.Webhooks = append(resp.Webhooks, toWebhook(w))
	}
	return reply(resp)
}

type webhookIDInput struct {
	ID string `path:"id" example:"wh-0a1b2c3d4e5f6a7b8" doc:"Webhook id."`
}

func (s *server) deleteWebhook(ctx context.Context, in *webhookIDInput) (*out[webhookJSON], error) {
	w, err := s.svc.DeleteWebhook(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toWebhook(w))
}

type deliveryJSON struct {
	ID            string     `json:"id"`
	EventID       string     `json:"eventId"`
	Attempt       int        `json:"attempt" doc:"0: the event was scheduled for the webhook; 1, 2, …: an attempt to deliver it."`
	Time          time.Time  `json:"time"`
	StatusCode    int        `json:"statusCode,omitempty" doc:"The receiver's HTTP status; absent when none came back."`
	Error         string     `json:"error,omitempty" doc:"Why the attempt failed."`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty" doc:"When the next attempt is due; absent once the delivery is done."`
	Done          bool       `json:"done" doc:"The delivery ended here: delivered (2xx) or given up."`
}

type deliveriesJSON struct {
	Deliveries []deliveryJSON `json:"deliveries" nullable:"false"`
}

func (s *server) listWebhookDeliveries(ctx context.Context, in *webhookIDInput) (*out[deliveriesJSON], error) {
	ds, err := s.svc.Deliveries(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := deliveriesJSON{Deliveries: make([]deliveryJSON, 0, len(ds))}
	for _, d := range ds {
		j := deliveryJSON{ID: d.ID, EventID: d.EventID, Attempt: d.Attempt, Time: d.Time.UTC(),
			StatusCode: d.Status, Error: d.Error, Done: d.Done}
		if !d.NextAt.IsZero() {
			next := d.NextAt.UTC()
			j.NextAttemptAt = &next
		}
		resp.Deliveries = append(resp.Deliveries, j)
	}
	return reply(resp)
}
