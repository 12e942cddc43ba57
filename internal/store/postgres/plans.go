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

const planColumns = `id, name, team, target, created_at, fee_minor, fee_currency`

func scanPlan(r rowScanner) (core.Plan, error) {
	var (
		p       core.Plan
		created time.Time
	)
	if err := r.Scan(&p.ID, &p.Name, &p.Team, &p.Target, &created, &p.Fee.Minor, &p.Fee.Currency); err != nil {
		return core.Plan{}, err
	}
	p.CreatedAt = created.UTC()
	return p, nil
}

// Plan returns one plan with its segments.
func (s *Store) Plan(ctx context.Context, id string) (core.Plan, error) {
	p, err := scanPlan(s.pool.QueryRow(ctx, `SELECT `+planColumns+` FROM plans WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Plan{}, fmt.Errorf("plan %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Plan{}, fmt.Errorf("reading plan %s: %w", id, err)
	}
	p.Segments, err = queryRows(ctx, s.pool, scanBlock,
		`SELECT `+blockSelect+` FROM blocks WHERE plan_id = $1 ORDER BY start_time, id`, id)
	if err != nil {
		return core.Plan{}, fmt.Errorf("reading the segments of plan %s: %w", id, err)
	}
	return p, nil
}

// ListPlans returns a team's plans (every team's for ""), oldest first,
// with their segments.
func (s *Store) ListPlans(ctx context.Context, team string) ([]core.Plan, error) {
	plans, err := queryRows(ctx, s.pool, scanPlan,
		`SELECT `+planColumns+` FROM plans WHERE $1 = '' OR team = $1 ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing plans: %w", err)
	}
	if len(plans) == 0 {
		return plans, nil
	}
	blocks, err := queryRows(ctx, s.pool, scanBlock, `SELECT `+blockSelect+` FROM blocks
		WHERE plan_id IN (SELECT id FROM plans WHERE $1 = '' OR team = $1) ORDER BY start_time, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing the segments of plans: %w", err)
	}
	store.GroupSegments(plans, blocks)
	return plans, nil
}

// queueInsertPlan queues the insert of a plan's row; a duplicate id is a
// conflict (dbError).
func (w *commitWriter) queueInsertPlan(p core.Plan) error {
	if err := store.ValidatePlan(p); err != nil {
		return fmt.Errorf("checking change: %w", err)
	}
	w.exec("inserting plan "+p.ID, nil, `INSERT INTO plans (`+planColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		p.ID, p.Name, p.Team, p.Target, seconds(p.CreatedAt), p.Fee.Minor, p.Fee.Currency)
	return nil
}
