package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"capblock/internal/core"
)

// Webhooks persists the teams' webhooks, their delivery log and the
// delivery worker's cursor. Every method is safe for concurrent use.
type Webhooks interface {
	// CreateWebhook stores a new webhook: its Sealed secret when it has
	// one, else its Secret in clear; a duplicate id is ErrConflict, an
	// unknown team ErrNotFound.
	CreateWebhook(ctx context.Context, w core.Webhook) error
	// SealWebhookSecret replaces the clear secret of webhook id, if it is
	// still clear, as before, with sealed. A webhook that is gone, or whose
	// secret is no longer clear (another replica sealed it), is
	// ErrConflict.
	SealWebhookSecret(ctx context.Context, id, clear string, sealed core.SealedSecret) error
	// Webhook returns one webhook, or ErrNotFound.
	Webhook(ctx context.Context, id string) (core.Webhook, error)
	// ListWebhooks lists the webhooks of a team ("" for all), ordered by
	// creation time then id.
	ListWebhooks(ctx context.Context, team string) ([]core.Webhook, error)
	// DeleteWebhook removes a webhook and its delivery log; an unknown id
	// is ErrNotFound.
	DeleteWebhook(ctx context.Context, id string) error

	// AppendDelivery adds a line to a webhook's delivery log. A line with
	// the same (Webhook, EventSeq, Attempt) as a stored one, or the same
	// id, is ErrConflict; an unknown webhook ErrNotFound.
	AppendDelivery(ctx context.Context, d core.Delivery) error
	// Deliveries returns the last limit lines of a webhook's log (all when
	// limit <= 0), ordered by event seq then attempt. An unknown webhook
	// has none.
	Deliveries(ctx context.Context, webhookID string, limit int) ([]core.Delivery, error)
	// PendingDeliveries returns, for every delivery (webhook, event seq)
	// whose last line is not Done, that last line, ordered by webhook then
	// event seq: what the worker still has to send after a restart.
	PendingDeliveries(ctx context.Context) ([]core.Delivery, error)
	// PruneDeliveries removes every line of the finished deliveries (those
	// whose last line is Done) that finished before before, and returns
	// how many lines it removed. Unfinished deliveries stay whole.
	PruneDeliveries(ctx context.Context, before time.Time) (int64, error)

	// WebhookCursor returns the last event seq whose deliveries were all
	// scheduled (stored as Attempt 0 lines), 0 before the first.
	WebhookCursor(ctx context.Context) (int64, error)
	// SetWebhookCursor moves the cursor to seq; it never moves back.
	SetWebhookCursor(ctx context.Context, seq int64) error
}

// EncodeEventPatterns is the stored form of a webhook's event patterns, a
// JSON list, the same in every driver.
func EncodeEventPatterns(patterns []string) string {
	if patterns == nil {
		patterns = []string{}
	}
	b, _ := json.Marshal(patterns) // strings always marshal
	return string(b)
}

// sealedPrefix starts the stored form of a sealed webhook secret. A clear
// secret never starts so: the server makes them "whsec_" and base64.
const sealedPrefix = "sealed:"

// EncodeWebhookSecret is the stored form of a webhook's secret, the same
// in every driver, kept in the column that held the clear secret before
// secrets were sealed: "sealed:" and the id of the key that sealed it,
// the nonce and the ciphertext (both base64) separated by colons; or the
// clear secret for a webhook without a sealed one.
func EncodeWebhookSecret(w core.Webhook) string {
	if w.Sealed.KeyID == "" {
		return w.Secret
	}
	return encodeSealed(w.Sealed)
}

// DecodeWebhookSecret reads what EncodeWebhookSecret stored into w: its
// Sealed secret, or its Secret when it was stored in clear.
func DecodeWebhookSecret(text string, w *core.Webhook) error {
	rest, sealed := strings.CutPrefix(text, sealedPrefix)
	if !sealed {
		w.Secret, w.Sealed = text, core.SealedSecret{}
		return nil
	}
	sealedSecret, err := decodeSealed(rest)
	if err != nil {
		return fmt.Errorf("decoding the sealed secret of webhook %s: %w", w.ID, err)
	}
	w.Secret, w.Sealed = "", sealedSecret
	return nil
}

// DecodeEventPatterns reads what EncodeEventPatterns stored.
func DecodeEventPatterns(text string) ([]string, error) {
	var patterns []string
	if err := json.Unmarshal([]byte(text), &patterns); err != nil {
		return nil, fmt.Errorf("decoding event patterns: %w", err)
	}
	return patterns, nil
}
