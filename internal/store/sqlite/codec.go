package sqlite

import (
	"errors"
	"fmt"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Times are stored as INTEGER unix seconds and read back in UTC, so a time
// round-trips exactly when it is whole seconds; finer precision is dropped.
func unixSeconds(t time.Time) int64 { return t.Unix() }

func fromUnix(s int64) time.Time { return time.Unix(s, 0).UTC() }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isConstraint reports whether err is a violated UNIQUE or PRIMARY KEY
// constraint, which Commit reports as a conflict.
func isConstraint(err error) bool {
	var e *sqlitedriver.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return true
	}
	return false
}

// blockColumns are the columns that scanBlock reads, in order.
const blockColumns = `id, name, team, instance_type, gpu_model, count, zone,
	start_time, end_time, state, fee_minor, fee_currency, created_at, tags,
	placements, warned, terminating, version, plan_id, lending, trace`

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanBlock(r rowScanner) (core.Block, error) {
	var (
		b                       core.Block
		start, end, created     int64
		state, tags, placements string
		warned, terminating     int
		lending                 int
	)
	err := r.Scan(&b.ID, &b.Name, &b.Team, &b.InstanceType, &b.GPUModel, &b.Count, &b.Zone,
		&start, &end, &state, &b.Fee.Minor, &b.Fee.Currency, &created, &tags,
		&placements, &warned, &terminating, &b.Version, &b.PlanID, &lending, &b.Trace)
	if err != nil {
		return core.Block{}, err
	}
	b.Start, b.End, b.CreatedAt = fromUnix(start), fromUnix(end), fromUnix(created)
	b.State = core.BlockState(state)
	b.Warned, b.Terminating, b.Lending = warned != 0, terminating != 0, lending != 0
	if b.Tags, err = store.DecodeTags(tags); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	if b.Placements, err = store.DecodePlacements(placements); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	return b, nil
}
