package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
)

// ErrPermanent marks an action that no retry can mend: its payload does
// not decode, or this backend does not take its kind. The outbox worker
// gives up on it at once instead of retrying it for a day.
var ErrPermanent = errors.New("no retry can mend it")

// blockPayload is what an action on a block carries, as JSON: the block
// as the decision that caused the action saw it. Its fields are named
// here, not by core.Block, so that a stored action still decodes after
// core's types change.
type blockPayload struct {
	ID           string             `json:"id"`
	Name         string             `json:"name,omitempty"`
	Team         string             `json:"team"`
	InstanceType string             `json:"instanceType"`
	GPUModel     string             `json:"gpuModel"`
	Count        int                `json:"count"`
	Zone         string             `json:"zone"`
	Start        time.Time          `json:"start"`
	End          time.Time          `json:"end"`
	State        core.BlockState    `json:"state"`
	Terminating  bool               `json:"terminating,omitempty"`
	PlanID       string             `json:"planId,omitempty"`
	Placements   []placementPayload `json:"placements"`
}

type placementPayload struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
}

// EncodeBlock is the payload of an action on block b: what Activate,
// Terminate or Release need of it.
func EncodeBlock(b core.Block) []byte {
	p := blockPayload{ID: b.ID, Name: b.Name, Team: b.Team, InstanceType: b.InstanceType, GPUModel: b.GPUModel,
		Count: b.Count, Zone: b.Zone, Start: b.Start.UTC(), End: b.End.UTC(), State: b.State,
		Terminating: b.Terminating, PlanID: b.PlanID, Placements: make([]placementPayload, 0, len(b.Placements))}
	for _, pl := range b.Placements {
		p.Placements = append(p.Placements, placementPayload{Node: pl.Node, GPUs: pl.GPUs})
	}
	data, err := json.Marshal(p)
	if err != nil {
		// Strings, numbers, times within RFC 3339's years and slices of
		// them always encode.
		panic(fmt.Sprintf("encoding the payload of block %s: %v", b.ID, err))
	}
	return data
}

// DecodeBlock reads back a payload of EncodeBlock.
func DecodeBlock(data []byte) (core.Block, error) {
	var p blockPayload
	if err := json.Unmarshal(data, &p); err != nil {
		return core.Block{}, err
	}
	if p.ID == "" {
		return core.Block{}, errors.New("the payload names no block")
	}
	b := core.Block{ID: p.ID, Name: p.Name, Team: p.Team, InstanceType: p.InstanceType, GPUModel: p.GPUModel,
		Count: p.Count, Zone: p.Zone, Start: p.Start, End: p.End, State: p.State, Terminating: p.Terminating, PlanID: p.PlanID}
	for _, pl := range p.Placements {
		b.Placements = append(b.Placements, core.Placement{Node: pl.Node, GPUs: pl.GPUs})
	}
	return b, nil
}

// Apply takes one action through b: an action on a block decodes its
// payload and calls Activate, Terminate or Release, each idempotent, so
// that applying an action again after a crash changes nothing more. An
// error that no retry can mend wraps ErrPermanent.
func Apply(ctx context.Context, b Backend, a core.Action) error {
	var call func(context.Context, core.Block) error
	switch a.Kind {
	case core.ActionActivate:
		call = b.Activate
	case core.ActionTerminate:
		call = b.Terminate
	case core.ActionRelease:
		call = b.Release
	default:
		return fmt.Errorf("%w: the %s backend takes no %q action", ErrPermanent, b.Name(), a.Kind)
	}
	blk, err := DecodeBlock(a.Payload)
	if err != nil {
		return fmt.Errorf("%w: decoding the payload of action %s: %v", ErrPermanent, a.ID, err)
	}
	if blk.ID != a.Subject {
		return fmt.Errorf("%w: action %s is on %s, but its payload is block %s", ErrPermanent, a.ID, a.Subject, blk.ID)
	}
	if err := call(ctx, blk); err != nil {
		return fmt.Errorf("%s of block %s on the %s backend: %w", a.Kind, blk.ID, b.Name(), err)
	}
	return nil
}
