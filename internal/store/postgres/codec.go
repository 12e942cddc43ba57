package postgres

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Times are stored as timestamptz in whole seconds and read back in UTC,
// as the sqlite driver does: a time round-trips exactly when it is whole
// seconds; finer precision is dropped.
func seconds(t time.Time) time.Time { return time.Unix(t.Unix(), 0).UTC() }

// lockKey is the advisory lock key of a name (a node, a team). Two names
// that share a key only make their commits wait for each other.
func lockKey(name string) int32 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int32(h.Sum32())
}

// SQLSTATE codes that Commit handles.
const (
	codeUniqueViolation      = "23505"
	codeExclusionViolation   = "23P01"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03" // lock_timeout ran out
)

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// retryable reports whether the database aborted a transaction only
// because it raced another one, so that running it again may succeed.
func retryable(err error) bool {
	switch sqlState(err) {
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
		return true
	}
	return false
}

// dbError wraps err, the failure of a statement that was doing what, so
// that the caller never sees a raw constraint error: a unique or exclusion
// violation is a conflict (the change no longer fits the stored state) and
// a value the database cannot store (class 22, such as a NUL byte in a
// text) is an invalid argument.
func dbError(what string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case pgErr.Code == codeExclusionViolation:
		// The detail names nodes by number: see the nodes table.
		return fmt.Errorf("%s: a GPU it allocates is held by another live block at the same time (%s: %s): %w",
			what, pgErr.ConstraintName, strings.TrimSuffix(pgErr.Detail, "."), store.ErrConflict)
	case pgErr.Code == codeUniqueViolation:
		detail := pgErr.Detail
		if detail == "" {
			detail = "constraint " + pgErr.ConstraintName + " refused it"
		}
		return fmt.Errorf("%s: %s: %w", what, strings.TrimSuffix(detail, "."), store.ErrConflict)
	case strings.HasPrefix(pgErr.Code, "22"):
		return fmt.Errorf("%s: %w", what, core.Invalidf("%s", pgErr.Message))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// blockColumns are the columns of 0001_init that scanBlock reads, in order.
const blockColumns = `id, name, team, instance_type, gpu_model, count, zone,
	start_time, end_time, state, fee_minor, fee_currency, created_at, tags,
	placements, warned, terminating, version`

// blockSelect are all the columns that scanBlock reads: blockColumns and
// the plan the block is a segment of (0005_plans; empty for none).
const blockSelect = blockColumns + `, plan_id, lending, trace`

// rowScanner is pgx.Row or pgx.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanBlock(r rowScanner) (core.Block, error) {
	var (
		b                       core.Block
		state, tags, placements string
	)
	err := r.Scan(&b.ID, &b.Name, &b.Team, &b.InstanceType, &b.GPUModel, &b.Count, &b.Zone,
		&b.Start, &b.End, &state, &b.Fee.Minor, &b.Fee.Currency, &b.CreatedAt, &tags,
		&placements, &b.Warned, &b.Terminating, &b.Version, &b.PlanID, &b.Lending, &b.Trace)
	if err != nil {
		return core.Block{}, err
	}
	b.Start, b.End, b.CreatedAt = b.Start.UTC(), b.End.UTC(), b.CreatedAt.UTC()
	b.State = core.BlockState(state)
	if b.Tags, err = store.DecodeTags(tags); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	if b.Placements, err = store.DecodePlacements(placements); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	return b, nil
}
