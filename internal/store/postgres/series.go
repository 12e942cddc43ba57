package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/core"
	"capblock/internal/store"
)

const seriesColumns = `id, name, team, instance_type, instance_count, zone, time_zone, days, start_local, end_local,
	first_date, last_date, created_at, fee_minor, fee_currency`

func scanSeries(r rowScanner) (core.Series, error) {
	var (
		s       core.Series
		days    string
		created time.Time
	)
	if err := r.Scan(&s.ID, &s.Name, &s.Team, &s.InstanceType, &s.Count, &s.Zone, &s.Schedule.TimeZone, &days,
		&s.Schedule.StartLocal, &s.Schedule.EndLocal, &s.Schedule.From, &s.Schedule.To, &created,
		&s.Fee.Minor, &s.Fee.Currency); err != nil {
		return core.Series{}, err
	}
	s.Schedule.Days = store.DecodeDays(days)
	s.CreatedAt = created.UTC()
	return s, nil
}

// Series returns one series with its occurrences.
func (s *Store) Series(ctx context.Context, id string) (core.Series, error) {
	sr, err := scanSeries(s.pool.QueryRow(ctx, `SELECT `+seriesColumns+` FROM series WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Series{}, fmt.Errorf("series %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Series{}, fmt.Errorf("reading series %s: %w", id, err)
	}
	sr.Occurrences, err = queryRows(ctx, s.pool, scanBlock, `SELECT `+blockSelect+` FROM blocks
		WHERE id IN (SELECT block_id FROM series_blocks WHERE series_id = $1) ORDER BY start_time, id`, id)
	if err != nil {
		return core.Series{}, fmt.Errorf("reading the occurrences of series %s: %w", id, err)
	}
	return sr, nil
}

type seriesMember struct{ series, block string }

// ListSeries returns a team's series (every team's for ""), oldest first,
// with their occurrences.
func (s *Store) ListSeries(ctx context.Context, team string) ([]core.Series, error) {
	series, err := queryRows(ctx, s.pool, scanSeries,
		`SELECT `+seriesColumns+` FROM series WHERE $1 = '' OR team = $1 ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing series: %w", err)
	}
	if len(series) == 0 {
		return series, nil
	}
	pairs, err := queryRows(ctx, s.pool, func(r rowScanner) (seriesMember, error) {
		var m seriesMember
		return m, r.Scan(&m.series, &m.block)
	}, `SELECT series_id, block_id FROM series_blocks
		WHERE series_id IN (SELECT id FROM series WHERE $1 = '' OR team = $1)`, team)
	if err != nil {
		return nil, fmt.Errorf("listing the occurrences of series: %w", err)
	}
	members := make(map[string]string, len(pairs))
	for _, p := range pairs {
		members[p.block] = p.series
	}
	blocks, err := queryRows(ctx, s.pool, scanBlock, `SELECT `+blockSelect+` FROM blocks
		WHERE id IN (SELECT block_id FROM series_blocks WHERE series_id IN (SELECT id FROM series WHERE $1 = '' OR team = $1))
		ORDER BY start_time, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing the occurrences of series: %w", err)
	}
	store.GroupOccurrences(series, members, blocks)
	return series, nil
}

// queueInsertSeries queues the insert of a series' row and occurrences; a
// duplicate id is a conflict (dbError).
func (w *commitWriter) queueInsertSeries(sr core.Series) error {
	if err := store.ValidateSeries(sr); err != nil {
		return fmt.Errorf("checking change: %w", err)
	}
	sc := sr.Schedule
	w.exec("inserting series "+sr.ID, nil, `INSERT INTO series (`+seriesColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		sr.ID, sr.Name, sr.Team, sr.InstanceType, sr.Count, sr.Zone, sc.TimeZone, store.EncodeDays(sc.Days),
		sc.StartLocal, sc.EndLocal, sc.From, sc.To, seconds(sr.CreatedAt), sr.Fee.Minor, sr.Fee.Currency)
	for _, b := range sr.Occurrences {
		w.exec(fmt.Sprintf("inserting occurrence %s of series %s", b.ID, sr.ID), nil,
			`INSERT INTO series_blocks (series_id, block_id) VALUES ($1, $2)`, sr.ID, b.ID)
	}
	return nil
}

const orderColumns = `id, name, team, mode, instance_type, instance_count, zone, duration_hours, start_after, end_before,
	deadline, max_fee_minor, max_fee_currency, state, block_id, reason, created_at, updated_at, version`

func scanOrder(r rowScanner) (core.Order, error) {
	var (
		o                                       core.Order
		mode, state                             string
		hours                                   int64
		after, before, deadline, created, moved time.Time
	)
	if err := r.Scan(&o.ID, &o.Name, &o.Team, &mode, &o.InstanceType, &o.Count, &o.Zone, &hours, &after, &before,
		&deadline, &o.MaxFee.Minor, &o.MaxFee.Currency, &state, &o.BlockID, &o.Reason, &created, &moved, &o.Version); err != nil {
		return core.Order{}, err
	}
	o.Mode, o.State = core.OrderMode(mode), core.OrderState(state)
	o.Duration = time.Duration(hours) * time.Hour
	o.StartAfter, o.EndBefore, o.Deadline = after.UTC(), before.UTC(), deadline.UTC()
	o.CreatedAt, o.UpdatedAt = created.UTC(), moved.UTC()
	return o, nil
}

// Order returns one standing order.
func (s *Store) Order(ctx context.Context, id string) (core.Order, error) {
	o, err := scanOrder(s.pool.QueryRow(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Order{}, fmt.Errorf("order %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Order{}, fmt.Errorf("reading order %s: %w", id, err)
	}
	return o, nil
}

// ListOrders returns a team's orders in a state, oldest first.
func (s *Store) ListOrders(ctx context.Context, team string, state core.OrderState) ([]core.Order, error) {
	orders, err := queryRows(ctx, s.pool, scanOrder, `SELECT `+orderColumns+` FROM orders
		WHERE ($1 = '' OR team = $1) AND ($2 = '' OR state = $2) ORDER BY created_at, id`, team, string(state))
	if err != nil {
		return nil, fmt.Errorf("listing orders: %w", err)
	}
	return orders, nil
}

// queueInsertOrder queues the insert of a new order at version 1.
func (w *commitWriter) queueInsertOrder(o core.Order) error {
	if err := store.ValidateOrder(o); err != nil {
		return fmt.Errorf("checking change: %w", err)
	}
	w.exec("inserting order "+o.ID, nil, `INSERT INTO orders (`+orderColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, 1)`,
		o.ID, o.Name, o.Team, string(o.Mode), o.InstanceType, o.Count, o.Zone, int64(o.Duration/time.Hour),
		seconds(o.StartAfter), seconds(o.EndBefore), seconds(o.Deadline), o.MaxFee.Minor, o.MaxFee.Currency,
		string(o.State), o.BlockID, o.Reason, seconds(o.CreatedAt), seconds(o.UpdatedAt))
	return nil
}

// queueUpdateOrder queues an order's change, a conflict unless its
// version is the expected one.
func (w *commitWriter) queueUpdateOrder(u store.OrderUpdate) error {
	o := u.Order
	if err := store.ValidateOrder(o); err != nil {
		return fmt.Errorf("checking change: %w", err)
	}
	w.exec("updating order "+o.ID, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("order %s is not at version %d: %w", o.ID, u.ExpectedVersion, store.ErrConflict)
		}
		return nil
	}, `UPDATE orders SET state = $1, block_id = $2, reason = $3, updated_at = $4, version = version + 1
		WHERE id = $5 AND version = $6`, string(o.State), o.BlockID, o.Reason, seconds(o.UpdatedAt), o.ID, u.ExpectedVersion)
	return nil
}
