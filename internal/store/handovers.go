package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"capblock/internal/core"
)

// Handover is a block's hours handed on from From to Until: transferred
// to another team's block (Kind core.HandOverTransfer: ToTeam,
// ToBlockID, Price), or released for resale (core.HandOverRelease), whose
// holder is credited Fee's share of what is resold (Fee over the
// BoughtGPUHours it paid for, less FeePercent) as ResoldGPUHours grow, up
// to GPUHours.
type Handover struct {
	ID        string
	Kind      string
	BlockID   string
	Team      string
	ToTeam    string
	ToBlockID string
	GPUModel  string
	From      time.Time
	Until     time.Time
	// Placements are the GPUs handed on (the block's), over [From, Until).
	Placements     []core.Placement
	GPUHours       int64
	Price          core.Money
	Fee            core.Money
	BoughtGPUHours int64
	FeePercent     int
	ResoldGPUHours int64
	Credited       core.Money
	CreatedAt      time.Time
	Version        int64
}

// HandoverWrite stores a hand-over: a new one when ExpectedVersion is 0
// (a duplicate id is a conflict), else the stored one at that version
// takes Handover's ResoldGPUHours and Credited (any other version is a
// conflict: two purchases resold the same release at once). On success
// the version is ExpectedVersion+1.
type HandoverWrite struct {
	Handover        Handover
	ExpectedVersion int64
}

// Handovers reads the stored hand-overs; Commit writes them
// (Change.Handovers).
type Handovers interface {
	// HandoversOf returns the hand-overs of a block, given or received
	// (BlockID or ToBlockID), oldest first.
	HandoversOf(ctx context.Context, blockID string) ([]Handover, error)
	// OpenReleases returns the releases of GPUs of gpuModel whose hours
	// [From, Until) meet [start, end) and are not all resold, oldest
	// first.
	OpenReleases(ctx context.Context, gpuModel string, start, end time.Time) ([]Handover, error)
}

// ValidateHandover rejects a hand-over that no stored state could accept.
// The error wraps core.ErrInvalidArgument.
func ValidateHandover(w HandoverWrite) error {
	h := w.Handover
	switch {
	case h.ID == "" || h.BlockID == "" || h.Team == "":
		return core.Invalidf("a hand-over needs an id, a block and a team")
	case h.Kind != core.HandOverTransfer && h.Kind != core.HandOverRelease:
		return core.Invalidf("hand-over %s: unknown kind %q", h.ID, h.Kind)
	case !h.Until.After(h.From):
		return core.Invalidf("hand-over %s: it ends before it starts", h.ID)
	case h.ResoldGPUHours < 0 || h.ResoldGPUHours > h.GPUHours:
		return core.Invalidf("hand-over %s: %d GPU-hours resold of %d", h.ID, h.ResoldGPUHours, h.GPUHours)
	}
	return nil
}

// handoverJSON is a hand-over's stored document; the fields that queries
// and the version check need also have columns of their own.
type handoverJSON struct {
	ToTeam         string          `json:"toTeam,omitempty"`
	ToBlockID      string          `json:"toBlockId,omitempty"`
	Placements     []placementJSON `json:"placements"`
	PriceMinor     int64           `json:"priceMinor"`
	FeeMinor       int64           `json:"feeMinor"`
	Currency       string          `json:"currency"`
	BoughtGPUHours int64           `json:"boughtGpuHours"`
	FeePercent     int             `json:"feePercent"`
	CreditedMinor  int64           `json:"creditedMinor"`
	CreatedAt      int64           `json:"createdAt"`
}

// EncodeHandover is the stored document of a hand-over.
func EncodeHandover(h Handover) string {
	pls := make([]placementJSON, len(h.Placements))
	for i, p := range h.Placements {
		pls[i] = placementJSON{Node: p.Node, GPUs: p.GPUs}
	}
	b, _ := json.Marshal(handoverJSON{ToTeam: h.ToTeam, ToBlockID: h.ToBlockID, Placements: pls,
		PriceMinor: h.Price.Minor, FeeMinor: h.Fee.Minor, Currency: h.Fee.Currency, BoughtGPUHours: h.BoughtGPUHours,
		FeePercent: h.FeePercent, CreditedMinor: h.Credited.Minor, CreatedAt: h.CreatedAt.Unix()}) // plain values always marshal
	return string(b)
}

// DecodeHandover fills a hand-over from its stored columns and document.
func DecodeHandover(h Handover, doc string) (Handover, error) {
	var d handoverJSON
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return Handover{}, fmt.Errorf("decoding hand-over %s: %w", h.ID, err)
	}
	h.ToTeam, h.ToBlockID = d.ToTeam, d.ToBlockID
	h.Placements = make([]core.Placement, len(d.Placements))
	for i, p := range d.Placements {
		h.Placements[i] = core.Placement{Node: p.Node, GPUs: p.GPUs}
	}
	h.Price = core.Money{Minor: d.PriceMinor, Currency: d.Currency}
	h.Fee = core.Money{Minor: d.FeeMinor, Currency: d.Currency}
	h.Credited = core.Money{Minor: d.CreditedMinor, Currency: d.Currency}
	h.BoughtGPUHours, h.FeePercent = d.BoughtGPUHours, d.FeePercent
	h.CreatedAt = time.Unix(d.CreatedAt, 0).UTC()
	return h, nil
}
