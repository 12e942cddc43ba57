package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

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

// journalsSQL selects the journals of a store.JournalFilter (?1 After,
// ?2 Team, ?3 Subject, ?4 Limit, -1 for none) with their postings, in
// journal order.
const journalsSQL = `WITH sel AS (
	SELECT id FROM journals WHERE seq > ?1
		AND (?2 = '' OR id IN (SELECT journal FROM postings WHERE team = ?2))
		AND (?3 = '' OR subject = ?3 OR id IN (SELECT journal FROM postings WHERE account = 'escrow:' || ?3))
	ORDER BY seq LIMIT ?4)
SELECT j.seq, j.id, j.time, j.kind, j.subject, j.instance_type, j.currency,
	p.account, p.team, p.kind, p.amount_minor, p.on_demand_minor, p.subject
FROM sel JOIN journals j ON j.id = sel.id JOIN postings p ON p.journal = j.id
ORDER BY j.seq, p.n`

// Journals returns the journals f selects, in journal order.
func (s *Store) Journals(ctx context.Context, f store.JournalFilter) ([]core.Journal, error) {
	limit := int64(-1)
	if f.Limit > 0 {
		limit = int64(f.Limit)
	}
	rows, err := s.rs.journals.QueryContext(ctx, f.After, f.Team, f.Subject, limit)
	if err != nil {
		return nil, fmt.Errorf("reading journals: %w", err)
	}
	defer rows.Close()
	var out []core.Journal
	for rows.Next() {
		var (
			j core.Journal
			p core.Posting
			t int64
		)
		if err := rows.Scan(&j.Seq, &j.ID, &t, &j.Kind, &j.Subject, &j.InstanceType, &j.Currency,
			&p.Account, &p.Team, &p.Kind, &p.Amount, &p.OnDemand, &p.Subject); err != nil {
			return nil, fmt.Errorf("reading journals: %w", err)
		}
		j.Time = fromUnix(t)
		out = store.AddPosting(out, j, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading journals: %w", err)
	}
	return out, nil
}

// Ledger returns the lines of a team's wallet (every team's for ""), in
// journal order.
// Spent sums the team's spending since, with the query the commit's
// budget guard runs.
func (s *Store) Spent(ctx context.Context, team string, since time.Time, credits bool) (int64, error) {
	var spent int64
	if err := s.r.QueryRowContext(ctx, budgetSpendSQL, core.WalletAccount(team), unixSeconds(since), boolInt(credits)).Scan(&spent); err != nil {
		return 0, fmt.Errorf("reading the spend of team %s: %w", team, err)
	}
	return spent, nil
}

func (s *Store) Ledger(ctx context.Context, team string) ([]core.LedgerEntry, error) {
	js, err := s.Journals(ctx, store.JournalFilter{Team: team})
	if err != nil {
		return nil, fmt.Errorf("reading the ledger of team %s: %w", team, err)
	}
	return store.LedgerOf(js, team), nil
}
