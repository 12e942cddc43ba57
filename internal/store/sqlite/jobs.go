package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"capblock/internal/core"
	"capblock/internal/store"
)

const jobColumns = `id, team, block_id, state, created_at, version, doc`

func scanJob(r rowScanner) (core.Job, error) {
	var (
		id, team, block, state, doc string
		created, version            int64
	)
	if err := r.Scan(&id, &team, &block, &state, &created, &version, &doc); err != nil {
		return core.Job{}, err
	}
	return store.DecodeJob(id, team, block, state, fromUnix(created), version, doc)
}

// Job returns one job.
func (s *Store) Job(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return core.Job{}, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns a team's jobs (every team's for ""), oldest first.
func (s *Store) ListJobs(ctx context.Context, team string, open bool) ([]core.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE (?1 = '' OR team = ?1)`
	if open {
		q += ` AND state NOT IN ('succeeded', 'failed', 'stopped')`
	}
	jobs, err := queryRows(ctx, s.r, scanJob, q+` ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, nil
}

// writeJob inserts or replaces a job inside a commit.
func (w *commitTx) writeJob(jw store.JobWrite) error {
	j := jw.Job
	if jw.ExpectedVersion == 0 {
		_, err := w.tx.ExecContext(w.ctx, `INSERT INTO jobs (`+jobColumns+`) VALUES (?, ?, ?, ?, ?, 1, ?)`,
			j.ID, j.Team, j.BlockID, string(j.State), unixSeconds(j.CreatedAt), store.EncodeJob(j))
		if isConstraint(err) {
			return fmt.Errorf("inserting job %s: it already exists: %w", j.ID, store.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("inserting job %s: %w", j.ID, err)
		}
		return nil
	}
	res, err := w.tx.ExecContext(w.ctx, `UPDATE jobs SET state = ?, block_id = ?, version = version + 1, doc = ? WHERE id = ? AND version = ?`,
		string(j.State), j.BlockID, store.EncodeJob(j), j.ID, jw.ExpectedVersion)
	if err != nil {
		return fmt.Errorf("updating job %s: %w", j.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("updating job %s: not at version %d: %w", j.ID, jw.ExpectedVersion, store.ErrConflict)
	}
	return nil
}
