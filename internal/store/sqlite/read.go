package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"capblock/internal/core"
	"capblock/internal/store"
)

// GetBlock returns a block with its placements, or an error wrapping
// store.ErrNotFound.
func (s *Store) GetBlock(ctx context.Context, id string) (core.Block, error) {
	b, err := scanBlock(s.rs.getBlock.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
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
	if f.Team != "" {
		where = append(where, "team = ?")
		args = append(args, f.Team)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if !f.EndAfter.IsZero() {
		where = append(where, "end_time > ?")
		args = append(args, unixSeconds(f.EndAfter))
	}
	q := "SELECT " + blockColumns + " FROM blocks"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY start_time, id"
	rows, err := s.r.QueryContext(ctx, q, args...)
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
	var created int64
	err := s.rs.idempotency.QueryRowContext(ctx, team, clientToken).Scan(&r.RequestHash, &r.Subject, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.IdempotencyRecord{}, fmt.Errorf("client token %q of team %s: %w", clientToken, team, store.ErrNotFound)
	}
	if err != nil {
		return store.IdempotencyRecord{}, fmt.Errorf("reading client token %q of team %s: %w", clientToken, team, err)
	}
	r.CreatedAt = fromUnix(created)
	return r, nil
}

// Events returns up to limit events of a team (every team's for "") with
// Seq > after, ordered by Seq; a limit of zero or less means no limit. A
// team's read seeks the events_by_team index, so it costs the team's
// events, not everyone's since the cursor.
func (s *Store) Events(ctx context.Context, team string, after int64, limit int) ([]core.Event, error) {
	n := int64(limit)
	if limit <= 0 {
		n = math.MaxInt64
	}
	var (
		rows *sql.Rows
		err  error
	)
	if team == "" {
		rows, err = s.rs.events.QueryContext(ctx, after, n)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT seq, id, time, type, subject, team, data FROM events
			WHERE team = ? AND seq > ? ORDER BY seq LIMIT ?`, team, after, n)
	}
	if err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	defer rows.Close()
	var events []core.Event
	for rows.Next() {
		var (
			e    core.Event
			t    int64
			data string
		)
		if err := rows.Scan(&e.Seq, &e.ID, &t, &e.Type, &e.Subject, &e.Team, &data); err != nil {
			return nil, fmt.Errorf("reading events after %d: %w", after, err)
		}
		e.Time = fromUnix(t)
		if e.Data, err = store.DecodeEventData(data); err != nil {
			return nil, fmt.Errorf("reading event %d: %w", e.Seq, err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, err)
	}
	return events, nil
}

// Ledger returns a team's ledger entries (every team's for ""), ordered
// by time then id.
func (s *Store) Ledger(ctx context.Context, team string) ([]core.LedgerEntry, error) {
	rows, err := s.rs.ledger.QueryContext(ctx, team)
	if err != nil {
		return nil, fmt.Errorf("reading ledger of team %s: %w", team, err)
	}
	defer rows.Close()
	var entries []core.LedgerEntry
	for rows.Next() {
		var (
			e core.LedgerEntry
			t int64
		)
		if err := rows.Scan(&e.ID, &e.Team, &t, &e.Kind, &e.Amount.Minor, &e.Amount.Currency, &e.Subject, &e.InstanceType, &e.OnDemand.Minor); err != nil {
			return nil, fmt.Errorf("reading ledger of team %s: %w", team, err)
		}
		e.Time = fromUnix(t)
		if e.OnDemand.Minor != 0 {
			e.OnDemand.Currency = e.Amount.Currency // one currency per entry
		}
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading ledger of team %s: %w", team, err)
	}
	return entries, nil
}
