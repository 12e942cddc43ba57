package postgres

import (
	"encoding/json"
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

// placementJSON is the stored form of a core.Placement, the same as the
// sqlite driver's.
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

// encodeEvents marshals the events' data before the transaction starts; it
// reads back as JSON decodes into map[string]any (numbers as float64).
func encodeEvents(events []core.Event) ([]string, error) {
	out := make([]string, len(events))
	for i, e := range events {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, core.Invalidf("event data is not JSON: %v", err))
		}
		out[i] = string(b)
	}
	return out, nil
}

func decodeData(text string) (map[string]any, error) {
	var data map[string]any
	if err := json.Unmarshal([]byte(text), &data); err != nil {
		return nil, fmt.Errorf("decoding event data: %w", err)
	}
	return data, nil
}

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
	case codeSerializationFailure, codeDeadlockDetected:
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
	case pgErr.Code == codeUniqueViolation || pgErr.Code == codeExclusionViolation:
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

// blockColumns are the columns that scanBlock reads, in order.
const blockColumns = `id, name, team, instance_type, gpu_model, count, zone,
	start_time, end_time, state, fee_minor, fee_currency, created_at, tags,
	placements, warned, terminating, version`

// rowScanner is pgx.Row or pgx.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanBlock(r rowScanner) (core.Block, error) {
	var (
		b                       core.Block
		state, tags, placements string
	)
	err := r.Scan(&b.ID, &b.Name, &b.Team, &b.InstanceType, &b.GPUModel, &b.Count, &b.Zone,
		&b.Start, &b.End, &state, &b.Fee.Minor, &b.Fee.Currency, &b.CreatedAt, &tags,
		&placements, &b.Warned, &b.Terminating, &b.Version)
	if err != nil {
		return core.Block{}, err
	}
	b.Start, b.End, b.CreatedAt = b.Start.UTC(), b.End.UTC(), b.CreatedAt.UTC()
	b.State = core.BlockState(state)
	if b.Tags, err = decodeTags(tags); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	if b.Placements, err = decodePlacements(placements); err != nil {
		return core.Block{}, fmt.Errorf("block %s: %w", b.ID, err)
	}
	return b, nil
}

// validateChange rejects a change that no stored state could accept, with
// the same rules as the sqlite driver.
func validateChange(c store.Change) error {
	for _, b := range c.Insert {
		if err := validateBlock(b, true); err != nil {
			return err
		}
	}
	for _, u := range c.Update {
		if err := validateBlock(u.Block, u.Replace); err != nil {
			return err
		}
	}
	return nil
}

func validateBlock(b core.Block, checkPlacements bool) error {
	switch {
	case b.ID == "":
		return core.Invalidf("a block needs an id")
	case !b.State.Valid():
		return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("unknown state %q", b.State))
	case !b.End.After(b.Start):
		return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("end %s is not after start %s", b.End, b.Start))
	}
	if !checkPlacements {
		return nil
	}
	type gpu struct {
		node string
		idx  int
	}
	seen := map[gpu]bool{}
	for _, p := range b.Placements {
		for _, g := range p.GPUs {
			if g < 0 {
				return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("negative GPU index %d on node %s", g, p.Node))
			}
			if seen[gpu{p.Node, g}] {
				return fmt.Errorf("block %s: %w", b.ID, core.Invalidf("GPU %d of node %s placed twice", g, p.Node))
			}
			seen[gpu{p.Node, g}] = true
		}
	}
	return nil
}
