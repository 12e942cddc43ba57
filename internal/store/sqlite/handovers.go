package sqlite

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/store"
)

const handoverColumns = `id, kind, block_id, to_block_id, team, gpu_model, from_time, until_time, gpu_hours, resold_gpu_hours, version, doc`

func scanHandover(r rowScanner) (store.Handover, error) {
	var (
		h           store.Handover
		toBlock     string
		from, until int64
		doc         string
	)
	if err := r.Scan(&h.ID, &h.Kind, &h.BlockID, &toBlock, &h.Team, &h.GPUModel, &from, &until,
		&h.GPUHours, &h.ResoldGPUHours, &h.Version, &doc); err != nil {
		return store.Handover{}, err
	}
	h.From, h.Until = fromUnix(from), fromUnix(until)
	return store.DecodeHandover(h, doc)
}

// HandoversOf returns the hand-overs a block gave or received.
func (s *Store) HandoversOf(ctx context.Context, blockID string) ([]store.Handover, error) {
	hs, err := queryRows(ctx, s.r, scanHandover, `SELECT `+handoverColumns+` FROM handovers
		WHERE block_id = ?1 UNION SELECT `+handoverColumns+` FROM handovers WHERE to_block_id = ?1 AND to_block_id <> ''
		ORDER BY from_time, id`, blockID)
	if err != nil {
		return nil, fmt.Errorf("reading the hand-overs of block %s: %w", blockID, err)
	}
	return hs, nil
}

// OpenReleases returns the releases of gpuModel meeting [start, end)
// with hours not yet resold.
func (s *Store) OpenReleases(ctx context.Context, gpuModel string, start, end time.Time) ([]store.Handover, error) {
	hs, err := queryRows(ctx, s.r, scanHandover, `SELECT `+handoverColumns+` FROM handovers
		WHERE gpu_model = ? AND until_time > ? AND kind = 'release' AND resold_gpu_hours < gpu_hours AND from_time < ?
		ORDER BY from_time, id`, gpuModel, unixSeconds(start), unixSeconds(end))
	if err != nil {
		return nil, fmt.Errorf("reading the releases of %s: %w", gpuModel, err)
	}
	return hs, nil
}

// writeHandover inserts a hand-over, or stores a release's resale,
// inside a commit.
func (w *commitTx) writeHandover(hw store.HandoverWrite) error {
	h := hw.Handover
	if hw.ExpectedVersion == 0 {
		_, err := w.tx.ExecContext(w.ctx, `INSERT INTO handovers (`+handoverColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?)`,
			h.ID, h.Kind, h.BlockID, h.ToBlockID, h.Team, h.GPUModel, unixSeconds(h.From), unixSeconds(h.Until),
			h.GPUHours, h.ResoldGPUHours, store.EncodeHandover(h))
		if isConstraint(err) {
			return fmt.Errorf("inserting hand-over %s: it already exists: %w", h.ID, store.ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("inserting hand-over %s: %w", h.ID, err)
		}
		return nil
	}
	res, err := w.tx.ExecContext(w.ctx, `UPDATE handovers SET resold_gpu_hours = ?, version = version + 1, doc = ? WHERE id = ? AND version = ?`,
		h.ResoldGPUHours, store.EncodeHandover(h), h.ID, hw.ExpectedVersion)
	if err != nil {
		return fmt.Errorf("updating hand-over %s: %w", h.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("updating hand-over %s: not at version %d: %w", h.ID, hw.ExpectedVersion, store.ErrConflict)
	}
	return nil
}
