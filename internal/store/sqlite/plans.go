package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"capblock/internal/core"
	"capblock/internal/store"
)

const planColumns = `id, name, team, target, created_at, fee_minor, fee_currency`

func scanPlan(r rowScanner) (core.Plan, error) {
	var (
		p       core.Plan
		created int64
	)
	if err := r.Scan(&p.ID, &p.Name, &p.Team, &p.Target, &created, &p.Fee.Minor, &p.Fee.Currency); err != nil {
		return core.Plan{}, err
	}
	p.CreatedAt = fromUnix(created)
	return p, nil
}

// Plan returns one plan with its segments.
func (s *Store) Plan(ctx context.Context, id string) (core.Plan, error) {
	p, err := scanPlan(s.r.QueryRowContext(ctx, `SELECT `+planColumns+` FROM plans WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Plan{}, fmt.Errorf("plan %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Plan{}, fmt.Errorf("reading plan %s: %w", id, err)
	}
	p.Segments, err = queryRows(ctx, s.r, scanBlock,
		`SELECT `+blockColumns+` FROM blocks WHERE plan_id = ? ORDER BY start_time, id`, id)
	if err != nil {
		return core.Plan{}, fmt.Errorf("reading the segments of plan %s: %w", id, err)
	}
	return p, nil
}

// ListPlans returns a team's plans (every team's for ""), oldest first,
// with their segments.
func (s *Store) ListPlans(ctx context.Context, team string) ([]core.Plan, error) {
	plans, err := queryRows(ctx, s.r, scanPlan,
		`SELECT `+planColumns+` FROM plans WHERE ?1 = '' OR team = ?1 ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing plans: %w", err)
	}
	if len(plans) == 0 {
		return plans, nil
	}
	blocks, err := queryRows(ctx, s.r, scanBlock, `SELECT `+blockColumns+` FROM blocks
		WHERE plan_id IN (SELECT id FROM plans WHERE ?1 = '' OR team = ?1) ORDER BY start_time, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing the segments of plans: %w", err)
	}
	store.GroupSegments(plans, blocks)
	return plans, nil
}

// insertPlan stores a plan's row inside a commit.
func (w *commitTx) insertPlan(p core.Plan) error {
	if err := store.ValidatePlan(p); err != nil {
		return fmt.Errorf("checking change: %w", err)
	}
	_, err := w.tx.ExecContext(w.ctx, `INSERT INTO plans (`+planColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Name, p.Team, p.Target, unixSeconds(p.CreatedAt), p.Fee.Minor, p.Fee.Currency)
	if isConstraint(err) {
		return fmt.Errorf("inserting plan %s: it already exists: %w", p.ID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("inserting plan %s: %w", p.ID, err)
	}
	return nil
}
