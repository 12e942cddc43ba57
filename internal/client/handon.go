package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// GPUHours is what became of reserved GPU time, in GPU-hours.
type GPUHours struct {
	Reserved float64 `json:"reserved"`
	Used     float64 `json:"used"`
	Lent     float64 `json:"lent"`
	Idle     float64 `json:"idle"`
}

// Handover is a block's hours handed on: transferred to another team or
// released for resale, with what was resold and credited so far.
type Handover struct {
	ID               string    `json:"id"`
	Kind             string    `json:"kind"` // "transfer" or "release"
	BlockID          string    `json:"blockId,omitempty"`
	Team             string    `json:"team"`
	ToTeam           string    `json:"toTeam,omitempty"`
	ToBlockID        string    `json:"toBlockId,omitempty"`
	From             time.Time `json:"from"`
	Until            time.Time `json:"until"`
	GPUHours         int64     `json:"gpuHours"`
	Price            Money     `json:"price"`
	ResaleFeePercent int       `json:"resaleFeePercent"`
	ResoldGPUHours   int64     `json:"resoldGpuHours"`
	Credited         Money     `json:"credited"`
	CreatedAt        time.Time `json:"createdAt"`
}

// HandOn is the answer of a transfer or a release: the holder's block as
// it is now, the block the receiving team got (a transfer) and the
// hand-over.
type HandOn struct {
	Block    Block    `json:"block"`
	Received *Block   `json:"received,omitempty"`
	Handover Handover `json:"handover"`
}

// TransferBlock transfers a block, or the rest of it, to another team:
// POST /v1/blocks/{id}/transfer. price ("" for none) is charged to the
// receiving team and credited to the holder.
func (c *Client) TransferBlock(ctx context.Context, id, team, price string) (HandOn, error) {
	body := map[string]string{"team": team}
	if price != "" {
		body["price"] = price
	}
	var h HandOn
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/transfer"), body: body}, &h); err != nil {
		return HandOn{}, wrapf(err, "transferring block %s", id)
	}
	return h, nil
}

// ReleaseBlock releases a block, or the rest of it, for resale:
// POST /v1/blocks/{id}/release.
func (c *Client) ReleaseBlock(ctx context.Context, id string) (HandOn, error) {
	var h HandOn
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/release")}, &h); err != nil {
		return HandOn{}, wrapf(err, "releasing block %s", id)
	}
	return h, nil
}

// SetLending lends a block's idle GPUs to backfill, or stops:
// POST /v1/blocks/{id}/lending.
func (c *Client) SetLending(ctx context.Context, id string, on bool) (Block, error) {
	var b Block
	body := map[string]bool{"enabled": on}
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/lending"), body: body}, &b); err != nil {
		return Block{}, wrapf(err, "setting the lending of block %s", id)
	}
	return b, nil
}

// UtilisationRow is the utilisation of one block, plan or team.
type UtilisationRow struct {
	Team         string   `json:"team,omitempty"`
	BlockID      string   `json:"blockId,omitempty"`
	PlanID       string   `json:"planId,omitempty"`
	InstanceType string   `json:"instanceType,omitempty"`
	GPUHours     GPUHours `json:"gpuHours"`
}

// Utilisation is the answer of GET /v1/utilisation.
type Utilisation struct {
	Blocks []UtilisationRow `json:"blocks"`
	Plans  []UtilisationRow `json:"plans"`
	Teams  []UtilisationRow `json:"teams"`
	Total  GPUHours         `json:"total"`
}

// Utilisation reads what became of reserved GPU-hours: GET
// /v1/utilisation. Empty arguments do not filter.
func (c *Client) Utilisation(ctx context.Context, team, from, to string) (Utilisation, error) {
	v := url.Values{}
	for key, val := range map[string]string{"team": team, "from": from, "to": to} {
		if val != "" {
			v.Set(key, val)
		}
	}
	var u Utilisation
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/utilisation", query: v}, &u); err != nil {
		return Utilisation{}, wrapf(err, "reading utilisation")
	}
	return u, nil
}
