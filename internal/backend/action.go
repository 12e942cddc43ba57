package backend

import (
	"context"
	"errors"
	"fmt"

	"capblock/internal/core"
)

// ErrPermanent marks an action that no retry can mend: its payload does
// not decode, or this backend does not take its kind. The outbox worker
// gives up on it at once instead of retrying it for a day.
var ErrPermanent = errors.New("no retry can mend it")

// EncodeBlock is the payload of an action on block b: the block as the
// decision that caused the action saw it, in core's block document (its
// fields named there, not by Go, so that a stored action still decodes
// after core's types change).
func EncodeBlock(b core.Block) []byte {
	data, err := core.EncodeBlockDoc(b)
	if err != nil {
		// Strings, numbers, times within RFC 3339's years and slices of
		// them always encode.
		panic(fmt.Sprintf("encoding the payload of block %s: %v", b.ID, err))
	}
	return data
}

// DecodeBlock reads back a payload of EncodeBlock.
func DecodeBlock(data []byte) (core.Block, error) {
	b, err := core.DecodeBlockDoc(data)
	if err != nil {
		return core.Block{}, err
	}
	if b.ID == "" {
		return core.Block{}, errors.New("the payload names no block")
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
	case core.ActionReserve:
		r, ok := b.(Reserver)
		if !ok {
			return nil // nothing to hold ahead on this engine
		}
		call = r.Reserve
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
