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

const jobColumns = `id, team, block_id, state, created_at, version, doc`

func scanJob(r rowScanner) (core.Job, error) {
	var (
		id, team, block, state, doc string
		created                     time.Time
		version                     int64
	)
	if err := r.Scan(&id, &team, &block, &state, &created, &version, &doc); err != nil {
		return core.Job{}, err
	}
	return store.DecodeJob(id, team, block, state, created.UTC(), version, doc)
}

// Job returns one job.
func (s *Store) Job(ctx context.Context, id string) (core.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Job{}, fmt.Errorf("job %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.Job{}, fmt.Errorf("reading job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns a team's jobs (every team's for ""), oldest first.
func (s *Store) ListJobs(ctx context.Context, team string, open bool) ([]core.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE ($1 = '' OR team = $1)`
	if open {
		q += ` AND state NOT IN ('succeeded', 'failed', 'stopped')`
	}
	jobs, err := queryRows(ctx, s.pool, scanJob, q+` ORDER BY created_at, id`, team)
	if err != nil {
		return nil, fmt.Errorf("listing jobs: %w", err)
	}
	return jobs, nil
}

// queueJob queues the insert or versioned replacement of a job.
func (w *commitWriter) queueJob(jw store.JobWrite) {
	j := jw.Job
	if jw.ExpectedVersion == 0 {
		w.exec("inserting job "+j.ID, nil, `INSERT INTO jobs (`+jobColumns+`) VALUES ($1, $2, $3, $4, $5, 1, $6)`,
			j.ID, j.Team, j.BlockID, string(j.State), seconds(j.CreatedAt), store.EncodeJob(j))
		return
	}
	w.exec("updating job "+j.ID, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("updating job %s: not at version %d: %w", j.ID, jw.ExpectedVersion, store.ErrConflict)
		}
		return nil
	}, `UPDATE jobs SET state = $1, block_id = $2, version = version + 1, doc = $3 WHERE id = $4 AND version = $5`,
		string(j.State), j.BlockID, store.EncodeJob(j), j.ID, jw.ExpectedVersion)
}
