package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"capblock/internal/store"
)

// This file holds the state of 0009_shared_state: the used offerings
// (written by Commit), the simulated clock and the teams' job uids. Each
// write runs on the single writer; its reads of the state it changes run
// inside its BEGIN IMMEDIATE transaction, so that another process on the
// same file cannot interleave.

// OfferingUsed reports whether a commit stored the offering id.
func (s *Store) OfferingUsed(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM used_offerings WHERE hash = ?`, store.OfferingHash(id)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up offering %s: %w", store.ShortOfferingID(id), err)
	}
	return true, nil
}

// PruneUsedOfferings forgets the used offerings that expired before
// before.
func (s *Store) PruneUsedOfferings(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM used_offerings WHERE expires_at < ?`, unixSeconds(before))
	if err != nil {
		return 0, fmt.Errorf("pruning used offerings: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("pruning used offerings: %w", err)
	}
	return n, nil
}

// SimClock returns the stored simulated time.
func (s *Store) SimClock(ctx context.Context) (time.Time, bool, error) {
	var nanos int64
	err := s.r.QueryRowContext(ctx, `SELECT unix_nanos FROM sim_clock WHERE id = 1`).Scan(&nanos)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reading the simulated clock: %w", err)
	}
	return store.SimClockTime(nanos), true, nil
}

// SaveSimClock stores t unless the stored time is later, in one
// statement, and returns the stored time.
func (s *Store) SaveSimClock(ctx context.Context, t time.Time) (time.Time, error) {
	nanos, err := store.SimClockNanos(t)
	if err != nil {
		return time.Time{}, fmt.Errorf("saving the simulated clock: %w", err)
	}
	var stored int64
	if err := s.w.QueryRowContext(ctx, `INSERT INTO sim_clock (id, unix_nanos) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET unix_nanos = max(unix_nanos, excluded.unix_nanos)
		RETURNING unix_nanos`, nanos).Scan(&stored); err != nil {
		return time.Time{}, fmt.Errorf("saving the simulated clock: %w", err)
	}
	return store.SimClockTime(stored), nil
}

// lowestFreeUIDSQL finds the lowest uid of [?1, ?2] that no team holds:
// ?1 itself, or one above a held uid of the range.
const lowestFreeUIDSQL = `SELECT c.uid FROM (
		SELECT ?1 AS uid
		UNION ALL
		SELECT uid + 1 FROM team_uids WHERE uid >= ?1 AND uid < ?2
	) c
	WHERE NOT EXISTS (SELECT 1 FROM team_uids t WHERE t.uid = c.uid)
	ORDER BY c.uid LIMIT 1`

// TeamUID returns the team's job uid, allocating the lowest free one of
// [lo, hi] on first use.
func (s *Store) TeamUID(ctx context.Context, team string, lo, hi int) (int, error) {
	if err := store.CheckUIDRange(lo, hi); err != nil {
		return 0, fmt.Errorf("allocating a job uid for team %s: %w", team, err)
	}
	// 1. Most calls find the recorded uid, without the writer.
	uid, found, err := teamUID(ctx, s.r, team)
	if err != nil || found {
		return uid, err
	}
	// 2. Otherwise allocate under the write lock, looking again first.
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("allocating a job uid for team %s: %w", team, err)
	}
	defer tx.Rollback()
	if uid, found, err := teamUID(ctx, tx, team); err != nil || found {
		return uid, err
	}
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM teams WHERE id = ?`, team).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("allocating a job uid: team %s: %w", team, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("allocating a job uid for team %s: %w", team, err)
	}
	err = tx.QueryRowContext(ctx, lowestFreeUIDSQL, lo, hi).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.UIDRangeFull(team, lo, hi)
	}
	if err != nil {
		return 0, fmt.Errorf("allocating a job uid for team %s: %w", team, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO team_uids (team, uid) VALUES (?, ?)`, team, uid); err != nil {
		return 0, fmt.Errorf("recording job uid %d of team %s: %w", uid, team, err)
	}
	if err := commit(ctx, tx); err != nil {
		return 0, fmt.Errorf("recording job uid %d of team %s: %w", uid, team, err)
	}
	return uid, nil
}

// queryRower is a *sql.DB or a *sql.Tx.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// teamUID reads a team's recorded uid.
func teamUID(ctx context.Context, q queryRower, team string) (int, bool, error) {
	var uid int
	err := q.QueryRowContext(ctx, `SELECT uid FROM team_uids WHERE team = ?`, team).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the job uid of team %s: %w", team, err)
	}
	return uid, true, nil
}
