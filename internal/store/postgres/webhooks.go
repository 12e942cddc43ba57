package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The webhooks (store.Webhooks) live in the tables of 0004_webhooks. Each
// write is one autocommit statement. A webhook's secret never appears in
// an error message.

var _ store.Webhooks = (*Store)(nil)

// CreateWebhook stores a new webhook; a duplicate id is a conflict, an
// unknown team not found.
func (s *Store) CreateWebhook(ctx context.Context, w core.Webhook) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhooks (id, team, url, events, secret, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		w.ID, w.Team, w.URL, store.EncodeEventPatterns(w.Events), store.EncodeWebhookSecret(w), seconds(w.CreatedAt))
	return createError("creating webhook "+w.ID, "its id is taken", fmt.Sprintf("team %s does not exist", w.Team), err)
}

const webhookColumns = `id, team, url, events, secret, created_at`

// Webhook returns one webhook, or an error wrapping store.ErrNotFound.
func (s *Store) Webhook(ctx context.Context, id string) (core.Webhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Webhook{}, fmt.Errorf("webhook %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Webhook{}, fmt.Errorf("reading webhook %s: %w", id, err)
	}
	return w, nil
}

// ListWebhooks lists the webhooks of a team ("" for all), ordered by
// creation time then id.
func (s *Store) ListWebhooks(ctx context.Context, team string) ([]core.Webhook, error) {
	var (
		hooks []core.Webhook
		err   error
	)
	if team == "" {
		hooks, err = queryRows(ctx, s.pool, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks ORDER BY created_at, id`)
	} else {
		hooks, err = queryRows(ctx, s.pool, scanWebhook,
			`SELECT `+webhookColumns+` FROM webhooks WHERE team = $1 ORDER BY created_at, id`, team)
	}
	if err != nil {
		return nil, fmt.Errorf("listing webhooks of team %q: %w", team, err)
	}
	return hooks, nil
}

func scanWebhook(r rowScanner) (core.Webhook, error) {
	var (
		w      core.Webhook
		events string
		secret string
	)
	if err := r.Scan(&w.ID, &w.Team, &w.URL, &events, &secret, &w.CreatedAt); err != nil {
		return core.Webhook{}, err
	}
	var err error
	if w.Events, err = store.DecodeEventPatterns(events); err != nil {
		return core.Webhook{}, fmt.Errorf("webhook %s: %w", w.ID, err)
	}
	if err := store.DecodeWebhookSecret(secret, &w); err != nil {
		return core.Webhook{}, err
	}
	w.CreatedAt = w.CreatedAt.UTC()
	return w, nil
}

// SealWebhookSecret replaces a clear secret with its sealed form, only if
// the stored secret is still that clear one.
func (s *Store) SealWebhookSecret(ctx context.Context, id, clear string, sealed core.SealedSecret) error {
	tag, err := s.pool.Exec(ctx, `UPDATE webhooks SET secret = $1 WHERE id = $2 AND secret = $3`,
		store.EncodeWebhookSecret(core.Webhook{Sealed: sealed}), id, clear)
	if err != nil {
		return fmt.Errorf("sealing the secret of webhook %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sealing the secret of webhook %s: it is gone or no longer clear: %w", id, store.ErrConflict)
	}
	return nil
}

// DeleteWebhook removes a webhook; its delivery log goes with it (ON
// DELETE CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhooks WHERE id = $1`, id)
	if err != nil {
		return dbError("deleting webhook "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("deleting webhook %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// PruneDeliveries removes the lines of the deliveries finished before
// before.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries d USING (
			SELECT webhook, event_seq FROM webhook_deliveries WHERE done AND time < $1) f
		WHERE d.webhook = f.webhook AND d.event_seq = f.event_seq`, seconds(before))
	if err != nil {
		return 0, dbError("pruning the webhook delivery log", err)
	}
	return tag.RowsAffected(), nil
}

// AppendDelivery adds a line to a webhook's delivery log.
func (s *Store) AppendDelivery(ctx context.Context, d core.Delivery) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, webhook, event_id, event_seq, attempt,
			time, status, error, next_at, done)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		d.ID, d.Webhook, d.EventID, d.EventSeq, d.Attempt,
		seconds(d.Time), d.Status, d.Error, optionalTime(d.NextAt), d.Done)
	return createError(fmt.Sprintf("storing attempt %d of event %d to webhook %s", d.Attempt, d.EventSeq, d.Webhook),
		"it is already stored", "the webhook does not exist", err)
}

const deliveryColumns = `id, webhook, event_id, event_seq, attempt, time, status, error, next_at, done`

// Deliveries returns the last limit lines of a webhook's log (all when
// limit <= 0), ordered by event seq then attempt.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]core.Delivery, error) {
	var n *int64 // LIMIT NULL: no limit
	if limit > 0 {
		l := int64(limit)
		n = &l
	}
	ds, err := queryRows(ctx, s.pool, scanDelivery, `SELECT `+deliveryColumns+` FROM (
			SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook = $1
			ORDER BY event_seq DESC, attempt DESC LIMIT $2) last
		ORDER BY event_seq, attempt`, webhookID, n)
	if err != nil {
		return nil, fmt.Errorf("reading the deliveries of webhook %s: %w", webhookID, err)
	}
	return ds, nil
}

// PendingDeliveries returns the last line of every delivery that is not
// done, by webhook then event seq. The UNIQUE (webhook, event_seq,
// attempt) index finds each line's successor.
func (s *Store) PendingDeliveries(ctx context.Context) ([]core.Delivery, error) {
	ds, err := queryRows(ctx, s.pool, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		WHERE NOT d.done AND NOT EXISTS (SELECT 1 FROM webhook_deliveries l
			WHERE l.webhook = d.webhook AND l.event_seq = d.event_seq AND l.attempt > d.attempt)
		ORDER BY d.webhook, d.event_seq`)
	if err != nil {
		return nil, fmt.Errorf("reading the pending webhook deliveries: %w", err)
	}
	return ds, nil
}

func scanDelivery(r rowScanner) (core.Delivery, error) {
	var (
		d      core.Delivery
		nextAt *time.Time
	)
	if err := r.Scan(&d.ID, &d.Webhook, &d.EventID, &d.EventSeq, &d.Attempt, &d.Time, &d.Status, &d.Error, &nextAt, &d.Done); err != nil {
		return core.Delivery{}, err
	}
	d.Time, d.NextAt = d.Time.UTC(), fromOptional(nextAt)
	return d, nil
}

// WebhookCursor returns the delivery worker's cursor, 0 before the first.
func (s *Store) WebhookCursor(ctx context.Context) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT seq FROM webhook_cursor WHERE id = 1`).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the webhook cursor: %w", err)
	}
	return seq, nil
}

// SetWebhookCursor moves the cursor forward to seq; an older seq leaves it.
func (s *Store) SetWebhookCursor(ctx context.Context, seq int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_cursor (id, seq) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET seq = greatest(webhook_cursor.seq, excluded.seq)`, seq)
	if err != nil {
		return dbError(fmt.Sprintf("storing the webhook cursor %d", seq), err)
	}
	return nil
}
