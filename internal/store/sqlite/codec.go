package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"capblock/internal/core"
)

// Times are stored as INTEGER unix seconds and read back in UTC, so a time
// round-trips exactly when it is whole seconds; finer precision is dropped.
func unixSeconds(t time.Time) int64 { return t.Unix() }

func fromUnix(s int64) time.Time { return time.Unix(s, 0).UTC() }

// placementJSON is the stored form of a core.Placement; its own field names
// keep the schema independent of the Go names in core.
type placementJSON struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

func encodePlacements(ps []core.Placement) string {
	if ps == nil {
		return "null"
	}
	out := make([]placementJSON, len(ps))
	for i, p := range ps {
		out[i] = placementJSON{Node: p.Node, GPUs: p.GPUs}
	}
	b, _ := json.Marshal(out) // strings and ints always marshal
	return string(b)
}

func decodePlacements(text string) ([]core.Placement, error) {
	var in []placementJSON
	if err := json.Unmarshal([]byte(text), &in); err != nil {
		return nil, fmt.Errorf("decoding placements: %w", err)
	}
	if in == nil {
		return nil, nil
	}
	out := make([]core.Placement, len(in))
	for i, p := range in {
		out[i] = core.Placement{Node: p.Node, GPUs: p.GPUs}
	}
	return out, nil
}

func encodeTags(tags map[string]string) string {
	b, _ := json.Marshal(tags) // a map of strings always marshals
	return string(b)
}

func decodeTags(text string) (map[string]string, error) {
	var tags map[string]string
	if err := json.Unmarshal([]byte(text), &tags); err != nil {
		return nil, fmt.Errorf("decoding tags: %w", err)
	}
	return tags, nil
}

// encodeData stores an event's data as JSON; it reads back as JSON decodes
// into map[string]any (numbers as float64).
func encodeData(data map[string]any) (string, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return "", core.Invalidf("event data is not JSON: %v", err)
	}
	return string(b), nil
}

func decodeData(text string) (map[string]any, error) {
	var data map[string]any
	if err := json.Unmarshal([]byte(text), &data); err != nil {
		return nil, fmt.Errorf("decoding event data: %w", err)
	}
	return data, nil
}

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
	placements, warned, terminating, version`

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanBlock(r rowScanner) (core.Block, error) {
	var (
		b                       core.Block
		start, end, created     int64
		state, tags, placements string
		warned, terminating     int
	)
	err := r.Scan(&b.ID, &b.Name, &b.Team, &b.InstanceType, &b.GPUModel, &b.Count, &b.Zone,
		&start, &end, &state, &b.Fee.Minor, &b.Fee.Currency, &created, &tags,
		&placements, &warned, &terminating, &b.Version)
	if err != nil {
		return core.Block{}, err
	}
	b.Start, b.End, b.CreatedAt = fromUnix(start), fromUnix(end), fromUnix(created)
	b.State = core.BlockState(state)
	b.Warned, b.Terminating = warned != 0, terminating != 0
	if b.Tags, err = decodeTags(tags); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	if b.Placements, err = decodePlacements(placements); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	return b, nil
}
