package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// GetBlock returns a block with its placements, or an error wrapping
// store.ErrNotFound.
func (s *Store) GetBlock(ctx context.Context, id string) (core.Block, error) {
	b, err := scanBlock(s.pool.QueryRow(ctx, `SELECT `+blockSelect+` FROM blocks WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Block{}, fmt.Errorf("block %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Block{}, fmt.Errorf("reading block %s: %w", id, err)
	}
	return b, nil
}

// ListBlocks returns the blocks matching f ordered by start time then id.
func (s *Store) ListBlocks(ctx context.Context, f store.BlockFilter) ([]core.Block, error) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Team != "" {
		where = append(where, "team = "+arg(f.Team))
	}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		where = append(where, "state = ANY("+arg(states)+"::text[])")
	}
	if !f.EndAfter.IsZero() {
		where = append(where, "end_time > "+arg(seconds(f.EndAfter)))
	}
	q := "SELECT " + blockSelect + " FROM blocks"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY start_time, id"
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	defer rows.Close()
	var blocks []core.Block
	for rows.Next() {
		b, err := scanBlock(rows)
		if err != nil {
			return nil, fmt.Errorf("listing blocks: %w", err)
		}
		blocks = append(blocks, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	return blocks, nil
}

// Idempotency returns the record of (team, clientToken), or an error
// wrapping store.ErrNotFound.
func (s *Store) Idempotency(ctx context.Context, team, clientToken string) (store.IdempotencyRecord, error) {
	r := store.IdempotencyRecord{Team: team, ClientToken: clientToken}
	err := s.pool.QueryRow(ctx, `SELECT request_hash, subject, created_at FROM idempotency
		WHERE team = $1 AND client_token = $2`, team, clientToken).Scan(&r.RequestHash, &r.Subject, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.IdempotencyRecord{}, fmt.Errorf("client token %q of team %s: %w", clientToken, team, store.ErrNotFound)
	}
	if err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("reading client token %q of team %s: %w", clientToken, team, err)
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return r, nil
}

// Events returns up to limit events of a team (every team's for "") with
// Seq > after, ordered by Seq; a limit of zero or less means no limit. A
// team's read seeks the events_by_team index.
//
// Commits take seq values in one order and may commit in another, so a
// plain read could return seq 11 while the commit holding 10 is still in
// flight, and a reader following the cursor would skip 10 for ever. The
// read therefore first takes the events lock exclusively: it waits for
// the commits that hold it shared (those between taking a seq and
// committing) and keeps new ones from taking a seq until it is done. Lock
// and read travel in one batch, which is one implicit transaction.
func (s *Store) Events(ctx context.Context, team string, after int64, limit int) ([]core.Event, error) {
	for attempt := 1; ; attempt++ {
		events, err := s.readEvents(ctx, team, after, limit)
		if err == nil || !retryable(err) || attempt == maxAttempts {
			return events, err
		}
		s.retries.Inc()
	}
}

func (s *Store) readEvents(ctx context.Context, team string, after int64, limit int) ([]core.Event, error) {
	n := int64(limit)
	if limit <= 0 {
		n = math.MaxInt64
	}
	query, args := `SELECT seq, id, time, type, subject, team, data FROM events
		WHERE seq > $1 ORDER BY seq LIMIT $2`, []any{after, n}
	if team != "" {
		query, args = `SELECT seq, id, time, type, subject, team, data FROM events
		WHERE team = $3 AND seq > $1 ORDER BY seq LIMIT $2`, append(args, team)
	}
	var events []core.Event
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1, 0)`, eventLockClass)
	b.Queue(query, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				e    core.Event
				t    time.Time
				data string
			)
			if err := rows.Scan(&e.Seq, &e.ID, &t, &e.Type, &e.Subject, &e.Team, &data); err != nil {
				return err
			}
			e.Time = t.UTC()
			var err error
			if e.Data, err = store.DecodeEventData(data); err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
			events = append(events, e)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	return events, nil
}

// Ledger returns a team's ledger entries (every team's for ""), ordered
// by time then id.
func (s *Store) Ledger(ctx context.Context, team string) ([]core.LedgerEntry, error) {
	const columns = `SELECT id, team, time, kind, amount_minor, currency, subject, instance_type, on_demand_minor FROM ledger`
	var (
		entries []core.LedgerEntry
		err     error
	)
	if team == "" {
		entries, err = queryRows(ctx, s.pool, scanLedgerEntry, columns+` ORDER BY time, id`)
	} else {
		entries, err = queryRows(ctx, s.pool, scanLedgerEntry, columns+` WHERE team = $1 ORDER BY time, id`, team)
	}
	if err != nil {
		return nil, fmt.Errorf("reading ledger of team %q: %w", team, err)
	}
	return entries, nil
}

func scanLedgerEntry(r rowScanner) (core.LedgerEntry, error) {
	var e core.LedgerEntry
	if err := r.Scan(&e.ID, &e.Team, &e.Time, &e.Kind, &e.Amount.Minor, &e.Amount.Currency, &e.Subject,
		&e.InstanceType, &e.OnDemand.Minor); err != nil {
		return core.LedgerEntry{}, err
	}
	e.Time = e.Time.UTC()
	if e.OnDemand.Minor != 0 {
		e.OnDemand.Currency = e.Amount.Currency // one currency per entry
	}
	return e, nil
}
