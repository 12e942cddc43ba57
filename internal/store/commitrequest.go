package store

import (
	"context"
	"fmt"
)

// CommitRequest is one Commit waiting for its group (see CommitGroup):
// the change, checked and encoded as the drivers store it, and, once its
// group has answered, the answer.
type CommitRequest struct {
	Ctx    context.Context
	Change Change
	// EventData are the events' data, encoded; Used the offerings the
	// change consumes.
	EventData []string
	Used      []UsedOffering

	// Set by the group that took it: the Seq of the change's events and
	// of its journals, or why it failed.
	Seqs, JournalSeqs []int64
	Err               error
}

// NewCommitRequest checks c and encodes what the drivers store of it.
func NewCommitRequest(ctx context.Context, c Change) (*CommitRequest, error) {
	if err := ValidateChange(c); err != nil {
		return nil, fmt.Errorf("checking change: %w", err)
	}
	data, err := EncodeEvents(c.Events)
	if err != nil {
		return nil, fmt.Errorf("checking change: %w", err)
	}
	used, err := UsedOfferings(c.Offerings)
	if err != nil {
		return nil, fmt.Errorf("checking change: %w", err)
	}
	return &CommitRequest{Ctx: ctx, Change: c, EventData: data, Used: used}, nil
}

// Committed writes what the commit gave into the change's slices, which
// the caller shares: the new Version of each block and order inserted or
// updated, the Seq of each event and journal.
func (r *CommitRequest) Committed() {
	c := r.Change
	for i := range c.Insert {
		c.Insert[i].Version = 1
	}
	for i := range c.Update {
		c.Update[i].Block.Version = c.Update[i].ExpectedVersion + 1
	}
	for i := range c.Events {
		c.Events[i].Seq = r.Seqs[i]
	}
	for i := range c.Journals {
		c.Journals[i].Seq = r.JournalSeqs[i]
	}
	for i := range c.InsertOrders {
		c.InsertOrders[i].Version = 1
	}
	for i := range c.UpdateOrders {
		c.UpdateOrders[i].Order.Version = c.UpdateOrders[i].ExpectedVersion + 1
	}
}
