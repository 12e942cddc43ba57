package core

import (
	"encoding/json"
	"fmt"
	"time"
)

// blockDoc is a whole block as JSON with field names of its own, so that
// what one version of capblock wrote (a replica's notice, the payload of
// a stored engine action) reads the same in another, whatever Go calls
// Block's fields.
type blockDoc struct {
	ID           string            `json:"id"`
	Name         string            `json:"name,omitempty"`
	Team         string            `json:"team"`
	InstanceType string            `json:"instanceType"`
	GPUModel     string            `json:"gpuModel"`
	Count        int               `json:"count"`
	Zone         string            `json:"zone"`
	Start        time.Time         `json:"start"`
	End          time.Time         `json:"end"`
	State        BlockState        `json:"state"`
	FeeMinor     int64             `json:"feeMinor"`
	Currency     string            `json:"currency"`
	CreatedAt    time.Time         `json:"createdAt"`
	Tags         map[string]string `json:"tags,omitempty"`
	Placements   []placementDoc    `json:"placements,omitempty"`
	Warned       bool              `json:"warned,omitempty"`
	Terminating  bool              `json:"terminating,omitempty"`
	PlanID       string            `json:"planId,omitempty"`
	Version      int64             `json:"version"`
	Trace        string            `json:"trace,omitempty"`
}

type placementDoc struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// EncodeBlockDoc encodes a whole block as blockDoc.
func EncodeBlockDoc(b Block) ([]byte, error) {
	d := blockDoc{ID: b.ID, Name: b.Name, Team: b.Team, InstanceType: b.InstanceType, GPUModel: b.GPUModel, Count: b.Count,
		Zone: b.Zone, Start: b.Start.UTC(), End: b.End.UTC(), State: b.State, FeeMinor: b.Fee.Minor, Currency: b.Fee.Currency,
		CreatedAt: b.CreatedAt.UTC(), Tags: b.Tags, Warned: b.Warned, Terminating: b.Terminating, PlanID: b.PlanID, Version: b.Version, Trace: b.Trace}
	for _, p := range b.Placements {
		d.Placements = append(d.Placements, placementDoc{Node: p.Node, GPUs: p.GPUs})
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding block %s: %w", b.ID, err)
	}
	return data, nil
}

// DecodeBlockDoc reads back what EncodeBlockDoc wrote.
func DecodeBlockDoc(data []byte) (Block, error) {
	var d blockDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return Block{}, fmt.Errorf("decoding a block: %w", err)
	}
	b := Block{ID: d.ID, Name: d.Name, Team: d.Team, InstanceType: d.InstanceType, GPUModel: d.GPUModel, Count: d.Count,
		Zone: d.Zone, Start: d.Start, End: d.End, State: d.State, Fee: Money{Minor: d.FeeMinor, Currency: d.Currency},
		CreatedAt: d.CreatedAt, Tags: d.Tags, Warned: d.Warned, Terminating: d.Terminating, PlanID: d.PlanID, Version: d.Version, Trace: d.Trace}
	for _, p := range d.Placements {
		b.Placements = append(b.Placements, Placement{Node: p.Node, GPUs: p.GPUs})
	}
	return b, nil
}
