package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The webhooks (store.Webhooks) live in the tables of 0004_webhooks. Like
// the accounts, each write is one autocommit statement on the writer
// connection and each read goes through the read pool. A webhook's secret
// never appears in an error message.

var _ store.Webhooks = (*Store)(nil)

// CreateWebhook stores a new webhook; a duplicate id is a conflict, an
// unknown team not found.
func (s *Store) CreateWebhook(ctx context.Context, w core.Webhook) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO webhooks (id, team, url, events, secret, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`,
		w.ID, w.Team, w.URL, store.EncodeEventPatterns(w.Events), store.EncodeWebhookSecret(w), unixSeconds(w.CreatedAt))
	switch {
	case isForeignKey(err):
		return fmt.Errorf("creating webhook %s: team %s does not exist: %w", w.ID, w.Team, store.ErrNotFound)
	case isConstraint(err):
		return fmt.Errorf("creating webhook %s: its id is taken: %w", w.ID, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("creating webhook %s: %w", w.ID, err)
	}
	return nil
}

const webhookColumns = `id, team, url, events, secret, created_at`

// Webhook returns one webhook, or an error wrapping store.ErrNotFound.
func (s *Store) Webhook(ctx context.Context, id string) (core.Webhook, error) {
	w, err := scanWebhook(s.r.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
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
		hooks, err = queryRows(ctx, s.r, scanWebhook, `SELECT `+webhookColumns+` FROM webhooks ORDER BY created_at, id`)
	} else {
		hooks, err = queryRows(ctx, s.r, scanWebhook,
			`SELECT `+webhookColumns+` FROM webhooks WHERE team = ? ORDER BY created_at, id`, team)
	}
	if err != nil {
		return nil, fmt.Errorf("listing webhooks of team %q: %w", team, err)
	}
	return hooks, nil
}

func scanWebhook(r rowScanner) (core.Webhook, error) {
	var (
		w       core.Webhook
		events  string
		secret  string
		created int64
	)
	if err := r.Scan(&w.ID, &w.Team, &w.URL, &events, &secret, &created); err != nil {
		return core.Webhook{}, err
	}
	var err error
	if w.Events, err = store.DecodeEventPatterns(events); err != nil {
		return core.Webhook{}, fmt.Errorf("webhook %s: %w", w.ID, err)
	}
	if err := store.DecodeWebhookSecret(secret, &w); err != nil {
		return core.Webhook{}, err
	}
	w.CreatedAt = fromUnix(created)
	return w, nil
}

// SealWebhookSecret replaces a clear secret with its sealed form, only if
// the stored secret is still that clear one.
func (s *Store) SealWebhookSecret(ctx context.Context, id, clear string, sealed core.SealedSecret) error {
	res, err := s.w.ExecContext(ctx, `UPDATE webhooks SET secret = ? WHERE id = ? AND secret = ?`,
		store.EncodeWebhookSecret(core.Webhook{Sealed: sealed}), id, clear)
	if err != nil {
		return fmt.Errorf("sealing the secret of webhook %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sealing the secret of webhook %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("sealing the secret of webhook %s: it is gone or no longer clear: %w", id, store.ErrConflict)
	}
	return nil
}

// DeleteWebhook removes a webhook; its delivery log goes with it (ON
// DELETE CASCADE).
func (s *Store) DeleteWebhook(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("deleting webhook %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("deleting webhook %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("deleting webhook %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// AppendDelivery adds a line to a webhook's delivery log.
func (s *Store) AppendDelivery(ctx context.Context, d core.Delivery) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, webhook, event_id, event_seq, attempt,
			time, status, error, next_at, done)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.Webhook, d.EventID, d.EventSeq, d.Attempt,
		unixSeconds(d.Time), d.Status, d.Error, optionalTime(d.NextAt), boolInt(d.Done))
	what := fmt.Sprintf("storing attempt %d of event %d to webhook %s", d.Attempt, d.EventSeq, d.Webhook)
	switch {
	case isForeignKey(err):
		return fmt.Errorf("%s: the webhook does not exist: %w", what, store.ErrNotFound)
	case isConstraint(err):
		return fmt.Errorf("%s: it is already stored: %w", what, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// PruneDeliveries removes the lines of the deliveries finished before
// before.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE (webhook, event_seq) IN (
		SELECT webhook, event_seq FROM webhook_deliveries WHERE done AND time < ?)`, unixSeconds(before))
	if err != nil {
		return 0, fmt.Errorf("pruning the webhook delivery log: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("pruning the webhook delivery log: %w", err)
	}
	return n, nil
}

const deliveryColumns = `id, webhook, event_id, event_seq, attempt, time, status, error, next_at, done`

// Deliveries returns the last limit lines of a webhook's log (all when
// limit <= 0), ordered by event seq then attempt.
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]core.Delivery, error) {
	n := int64(limit)
	if limit <= 0 {
		n = -1 // SQLite: no limit
	}
	ds, err := queryRows(ctx, s.r, scanDelivery, `SELECT `+deliveryColumns+` FROM (
			SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook = ?
			ORDER BY event_seq DESC, attempt DESC LIMIT ?)
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
	ds, err := queryRows(ctx, s.r, scanDelivery, `SELECT `+deliveryColumns+` FROM webhook_deliveries d
		WHERE d.done = 0 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries l
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
		t      int64
		nextAt sql.NullInt64
		done   int
	)
	if err := r.Scan(&d.ID, &d.Webhook, &d.EventID, &d.EventSeq, &d.Attempt, &t, &d.Status, &d.Error, &nextAt, &done); err != nil {
		return core.Delivery{}, err
	}
	d.Time, d.NextAt, d.Done = fromUnix(t), fromOptional(nextAt), done != 0
	return d, nil
}

// WebhookCursor returns the delivery worker's cursor, 0 before the first.
func (s *Store) WebhookCursor(ctx context.Context) (int64, error) {
	var seq int64
	err := s.r.QueryRowContext(ctx, `SELECT seq FROM webhook_cursor WHERE id = 1`).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the webhook cursor: %w", err)
	}
	return seq, nil
}

// SetWebhookCursor moves the cursor forward to seq; an older seq leaves it.
func (s *Store) SetWebhookCursor(ctx context.Context, seq int64) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO webhook_cursor (id, seq) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq)`, seq)
	if err != nil {
		return fmt.Errorf("storing the webhook cursor %d: %w", seq, err)
	}
	return nil
}
