package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/store"
)

// This file holds the state of 0009_shared_state: the used offerings
// (written by Commit), the simulated clock and the teams' job uids. Each
// write is one autocommit statement whose outcome does not depend on a
// read before it, so replicas racing on them need no transaction.

// maxUIDAttempts bounds how often TeamUID looks again after losing a race
// for a uid to another team's allocation.
const maxUIDAttempts = 20

// OfferingUsed reports whether a commit stored the offering id.
func (s *Store) OfferingUsed(ctx context.Context, id string) (bool, error) {
	var used bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM used_offerings WHERE hash = $1)`,
		store.OfferingHash(id)).Scan(&used); err != nil {
		return false, dbError("looking up offering "+store.ShortOfferingID(id), err)
	}
	return used, nil
}

// PruneUsedOfferings forgets the used offerings that expired before
// before.
func (s *Store) PruneUsedOfferings(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM used_offerings WHERE expires_at < $1`, seconds(before))
	if err != nil {
		return 0, dbError("pruning used offerings", err)
	}
	return tag.RowsAffected(), nil
}

// SimClock returns the stored simulated time.
func (s *Store) SimClock(ctx context.Context) (time.Time, bool, error) {
	var nanos int64
	err := s.pool.QueryRow(ctx, `SELECT unix_nanos FROM sim_clock WHERE id = 1`).Scan(&nanos)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, dbError("reading the simulated clock", err)
	}
	return store.SimClockTime(nanos), true, nil
}

// SaveSimClock stores t unless the stored time is later, in one
// statement (replicas moving the clock at once keep the latest), and
// returns the stored time.
func (s *Store) SaveSimClock(ctx context.Context, t time.Time) (time.Time, error) {
	nanos, err := store.SimClockNanos(t)
	if err != nil {
		return time.Time{}, fmt.Errorf("saving the simulated clock: %w", err)
	}
	// The other replicas hear of it (a Clock notice) once it is stored:
	// the statement and its NOTIFY commit together.
	var stored int64
	if err := s.pool.QueryRow(ctx, `WITH saved AS (
			INSERT INTO sim_clock (id, unix_nanos) VALUES (1, $1)
			ON CONFLICT (id) DO UPDATE SET unix_nanos = greatest(sim_clock.unix_nanos, excluded.unix_nanos)
			RETURNING unix_nanos)
		SELECT unix_nanos, pg_notify($2, $3) FROM saved`, nanos, blocksChannel, clockNotice).Scan(&stored, new(any)); err != nil {
		return time.Time{}, dbError("saving the simulated clock", err)
	}
	return store.SimClockTime(stored), nil
}

// lowestFreeUIDSQL finds the lowest uid of [$1, $2] that no team holds:
// $1 itself, or one above a held uid of the range.
const lowestFreeUIDSQL = `SELECT c.uid FROM (
		SELECT $1::integer AS uid
		UNION ALL
		SELECT uid + 1 FROM team_uids WHERE uid >= $1 AND uid < $2
	) c
	WHERE NOT EXISTS (SELECT 1 FROM team_uids t WHERE t.uid = c.uid)
	ORDER BY c.uid LIMIT 1`

// TeamUID returns the team's job uid, allocating the lowest free one of
// [lo, hi] on first use. An allocation that races another (of the same
// team, or of another team for the same uid) inserts nothing, since
// either unique key refuses it, and looks again: it then finds the team's
// uid, or the next free one.
func (s *Store) TeamUID(ctx context.Context, team string, lo, hi int) (int, error) {
	if err := store.CheckUIDRange(lo, hi); err != nil {
		return 0, fmt.Errorf("allocating a job uid for team %s: %w", team, err)
	}
	for range maxUIDAttempts {
		// 1. The recorded uid, if any.
		var uid int
		err := s.pool.QueryRow(ctx, `SELECT uid FROM team_uids WHERE team = $1`, team).Scan(&uid)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, dbError("reading the job uid of team "+team, err)
		}
		// 2. The lowest free uid of the range.
		err = s.pool.QueryRow(ctx, lowestFreeUIDSQL, lo, hi).Scan(&uid)
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := s.Team(ctx, team); err != nil {
				return 0, fmt.Errorf("allocating a job uid: %w", err)
			}
			return 0, store.UIDRangeFull(team, lo, hi)
		}
		if err != nil {
			return 0, dbError("allocating a job uid for team "+team, err)
		}
		// 3. Take it, unless another allocation took it or the team's.
		tag, err := s.pool.Exec(ctx, `INSERT INTO team_uids (team, uid) VALUES ($1, $2) ON CONFLICT DO NOTHING`, team, uid)
		if sqlState(err) == codeForeignKeyViolation {
			return 0, fmt.Errorf("allocating a job uid: team %s: %w", team, store.ErrNotFound)
		}
		if err != nil {
			return 0, dbError(fmt.Sprintf("recording job uid %d of team %s", uid, team), err)
		}
		if tag.RowsAffected() == 1 {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("allocating a job uid for team %s: lost to concurrent allocations %d times in a row: %w",
		team, maxUIDAttempts, store.ErrConflict)
}
