package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Webhooks: a team's subscriptions to its events. The use cases here
// manage them; webhookworker.go delivers the events.

const (
	// maxWebhooksPerTeam bounds a team's webhooks, and so the senders that
	// the delivery worker runs for it.
	maxWebhooksPerTeam = 16
	// maxEventPatterns bounds the patterns of one webhook.
	maxEventPatterns = 32
	// maxWebhookURL bounds a webhook's URL, in bytes.
	maxWebhookURL = 2048
	// deliveryLogPage is how many lines of a delivery log one call returns
	// at most: the latest.
	deliveryLogPage = 500
)

// CreateWebhook subscribes url to the events of team whose type matches
// one of patterns. The webhook returned carries its signing secret, which
// no later call shows again; it is stored sealed (webhooksecrets.go).
func (s *Service) CreateWebhook(ctx context.Context, team, rawURL string, patterns []string) (core.Webhook, error) {
	// 1. Check the request.
	if err := checkWebhookURL(rawURL, s.allowPrivateWebhooks); err != nil {
		return core.Webhook{}, err
	}
	patterns, err := checkEventPatterns(patterns)
	if err != nil {
		return core.Webhook{}, err
	}
	existing, err := s.store.ListWebhooks(ctx, team)
	if err != nil {
		return core.Webhook{}, fmt.Errorf("listing the webhooks of team %s: %w", team, err)
	}
	if len(existing) >= maxWebhooksPerTeam {
		return core.Webhook{}, core.Invalidf("team %s has %d webhooks, the most it may have; delete one first", team, len(existing))
	}
	// 2. Store it with a fresh secret.
	w := core.Webhook{ID: newID("wh"), Team: team, URL: rawURL, Events: patterns, Secret: newWebhookSecret(), CreatedAt: s.clock.Now()}
	if err := s.store.CreateWebhook(ctx, s.sealWebhookSecret(w)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return core.Webhook{}, core.Invalidf("team %q does not exist (GET /v1/teams lists them)", team)
		}
		return core.Webhook{}, fmt.Errorf("creating a webhook for team %s: %w", team, err)
	}
	return w, nil
}

// checkWebhookURL accepts absolute http and https URLs with a host, a
// public one unless allowPrivate (see webhookdest.go). The URL is not
// repeated in the message: it may hold a credential.
func checkWebhookURL(raw string, allowPrivate bool) error {
	if len(raw) > maxWebhookURL {
		return core.Invalidf("url: %d bytes is longer than the %d allowed", len(raw), maxWebhookURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return core.Invalidf("url: want an absolute http:// or https:// URL, such as https://example.com/capblock-events")
	}
	if !allowPrivate {
		if err := checkWebhookHost(u.Hostname(), interfaceAddrs); err != nil {
			return core.Invalidf("%s", err)
		}
	}
	return nil
}

// checkEventPatterns validates the patterns and drops repeats, keeping the
// first of each in order.
func checkEventPatterns(patterns []string) ([]string, error) {
	if len(patterns) == 0 {
		return nil, core.Invalidf("events: name at least one event type or pattern, such as block.* or *")
	}
	if len(patterns) > maxEventPatterns {
		return nil, core.Invalidf("events: %d patterns is more than the %d allowed", len(patterns), maxEventPatterns)
	}
	var out []string
	for _, p := range patterns {
		if err := core.CheckEventPattern(p); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// newWebhookSecret returns a random signing secret: 32 bytes, in base64.
func newWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// ListWebhooks lists the webhooks in scope: every team's for an admin
// (scope ""), else the scope team's.
func (s *Service) ListWebhooks(ctx context.Context, scope string) ([]core.Webhook, error) {
	ws, err := s.store.ListWebhooks(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("listing webhooks: %w", err)
	}
	return ws, nil
}

// webhook returns a webhook in scope; another team's is not found.
func (s *Service) webhook(ctx context.Context, scope, id string) (core.Webhook, error) {
	w, err := s.store.Webhook(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && scope != "" && w.Team != scope) {
		return core.Webhook{}, fmt.Errorf("%w: webhook %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Webhook{}, fmt.Errorf("loading webhook %s: %w", id, err)
	}
	return w, nil
}

// DeleteWebhook removes a webhook in scope and its delivery log, and
// returns what it was; the deliveries still queued for it are dropped.
func (s *Service) DeleteWebhook(ctx context.Context, scope, id string) (core.Webhook, error) {
	w, err := s.webhook(ctx, scope, id)
	if err != nil {
		return core.Webhook{}, err
	}
	err = s.store.DeleteWebhook(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return core.Webhook{}, fmt.Errorf("%w: webhook %s", core.ErrNotFound, id) // deleted meanwhile
	}
	if err != nil {
		return core.Webhook{}, fmt.Errorf("deleting webhook %s: %w", id, err)
	}
	return w, nil
}

// Deliveries returns the latest lines of the delivery log of a webhook in
// scope, oldest first.
func (s *Service) Deliveries(ctx context.Context, scope, id string) ([]core.Delivery, error) {
	if _, err := s.webhook(ctx, scope, id); err != nil {
		return nil, err
	}
	ds, err := s.store.Deliveries(ctx, id, deliveryLogPage)
	if err != nil {
		return nil, fmt.Errorf("reading the deliveries of webhook %s: %w", id, err)
	}
	return ds, nil
}
