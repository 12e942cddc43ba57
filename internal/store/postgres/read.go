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

// journalsSQL selects the journals of a store.JournalFilter ($1 After,
// $2 Team, $3 Subject, $4 Limit, NULL for none) with their postings, in
// journal order.
const journalsSQL = `WITH sel AS (
	SELECT id FROM journals WHERE seq > $1::bigint
		AND ($2::text = '' OR id IN (SELECT journal FROM postings WHERE team = $2::text))
		AND ($3::text = '' OR subject = $3::text OR id IN (SELECT journal FROM postings WHERE account = 'escrow:' || $3::text))
	ORDER BY seq LIMIT $4::bigint)
SELECT j.seq, j.id, j.time, j.kind, j.subject, j.instance_type, j.currency,
	p.account, p.team, p.kind, p.amount_minor, p.on_demand_minor, p.subject
FROM sel JOIN journals j ON j.id = sel.id JOIN postings p ON p.journal = j.id
ORDER BY j.seq, p.n`

// Journals returns the journals f selects, in journal order.
func (s *Store) Journals(ctx context.Context, f store.JournalFilter) ([]core.Journal, error) {
	var limit *int64
	if f.Limit > 0 {
		l := int64(f.Limit)
		limit = &l
	}
	rows, err := s.pool.Query(ctx, journalsSQL, f.After, f.Team, f.Subject, limit)
	if err != nil {
		return nil, fmt.Errorf("reading journals: %w", err)
	}
	defer rows.Close()
	var out []core.Journal
	for rows.Next() {
		var (
			j core.Journal
			p core.Posting
		)
		if err := rows.Scan(&j.Seq, &j.ID, &j.Time, &j.Kind, &j.Subject, &j.InstanceType, &j.Currency,
			&p.Account, &p.Team, &p.Kind, &p.Amount, &p.OnDemand, &p.Subject); err != nil {
			return nil, fmt.Errorf("reading journals: %w", err)
		}
		j.Time = j.Time.UTC()
		out = store.AddPosting(out, j, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading journals: %w", err)
	}
	return out, nil
}

// Spent sums the team's spending since, with the query the commit's
// budget guard runs.
func (s *Store) Spent(ctx context.Context, team string, since time.Time, credits bool) (int64, error) {
	var spent int64
	if err := s.pool.QueryRow(ctx, budgetSpendSQL, core.WalletAccount(team), seconds(since), credits).Scan(&spent); err != nil {
		return 0, dbError("reading the spend of team "+team, err)
	}
	return spent, nil
}

// Ledger returns the lines of a team's wallet (every team's for ""), in
// journal order.
func (s *Store) Ledger(ctx context.Context, team string) ([]core.LedgerEntry, error) {
	js, err := s.Journals(ctx, store.JournalFilter{Team: team})
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of team %q: %w", team, err)
	}
	return store.LedgerOf(js, team), nil
}
