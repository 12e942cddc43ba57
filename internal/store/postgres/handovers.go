package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"capblock/internal/store"
)

const handoverColumns = `id, kind, block_id, to_block_id, team, gpu_model, from_time, until_time, gpu_hours, resold_gpu_hours, version, doc`

func scanHandover(r rowScanner) (store.Handover, error) {
	var (
		h           store.Handover
		toBlock     string
		from, until time.Time
		doc         string
	)
	if err := r.Scan(&h.ID, &h.Kind, &h.BlockID, &toBlock, &h.Team, &h.GPUModel, &from, &until,
		&h.GPUHours, &h.ResoldGPUHours, &h.Version, &doc); err != nil {
		return store.Handover{}, err
	}
	h.From, h.Until = from.UTC(), until.UTC()
	return store.DecodeHandover(h, doc)
}

// HandoversOf returns the hand-overs a block gave or received.
func (s *Store) HandoversOf(ctx context.Context, blockID string) ([]store.Handover, error) {
	hs, err := queryRows(ctx, s.pool, scanHandover, `SELECT `+handoverColumns+` FROM handovers
		WHERE block_id = $1 UNION SELECT `+handoverColumns+` FROM handovers WHERE to_block_id = $1 AND to_block_id <> ''
		ORDER BY from_time, id`, blockID)
	if err != nil {
		return nil, fmt.Errorf("reading the hand-overs of block %s: %w", blockID, err)
	}
	return hs, nil
}

// OpenReleases returns the releases of gpuModel meeting [start, end)
// with hours not yet resold.
func (s *Store) OpenReleases(ctx context.Context, gpuModel string, start, end time.Time) ([]store.Handover, error) {
	hs, err := queryRows(ctx, s.pool, scanHandover, `SELECT `+handoverColumns+` FROM handovers
		WHERE gpu_model = $1 AND until_time > $2 AND kind = 'release' AND resold_gpu_hours < gpu_hours AND from_time < $3
		ORDER BY from_time, id`, gpuModel, seconds(start), seconds(end))
	if err != nil {
		return nil, fmt.Errorf("reading the releases of %s: %w", gpuModel, err)
	}
	return hs, nil
}

// queueHandover queues the insert of a hand-over, or the versioned
// update of a release's resale.
func (w *commitWriter) queueHandover(hw store.HandoverWrite) {
	h := hw.Handover
	if hw.ExpectedVersion == 0 {
		w.exec("inserting hand-over "+h.ID, nil, `INSERT INTO handovers (`+handoverColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11)`,
			h.ID, h.Kind, h.BlockID, h.ToBlockID, h.Team, h.GPUModel, seconds(h.From), seconds(h.Until),
			h.GPUHours, h.ResoldGPUHours, store.EncodeHandover(h))
		return
	}
	w.exec("updating hand-over "+h.ID, func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("updating hand-over %s: not at version %d: %w", h.ID, hw.ExpectedVersion, store.ErrConflict)
		}
		return nil
	}, `UPDATE handovers SET resold_gpu_hours = $1, version = version + 1, doc = $2 WHERE id = $3 AND version = $4`,
		h.ResoldGPUHours, store.EncodeHandover(h), h.ID, hw.ExpectedVersion)
}
