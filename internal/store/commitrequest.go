package store

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/telemetry"
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
	// Group is how many changes the transaction that took it held.
	Group int

	span trace.Span
}

// NewCommitRequest checks c and encodes what the drivers store of it. It
// starts the commit's span, which End ends, and gives each of c's
// actions the trace context of the decision (ctx's), so that the
// action's application continues its trace.
func NewCommitRequest(ctx context.Context, c Change) (*CommitRequest, error) {
	ctx, span := telemetry.Tracer().Start(ctx, "store.commit", trace.WithAttributes(
		attribute.Int("capblock.change.blocks", len(c.Insert)+len(c.Update)),
		attribute.Int("capblock.change.actions", len(c.Actions)),
		attribute.Int("capblock.change.events", len(c.Events))))
	r, err := newCommitRequest(ctx, c)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "invalid change")
		span.End()
		return nil, err
	}
	r.span = span
	return r, nil
}

func newCommitRequest(ctx context.Context, c Change) (*CommitRequest, error) {
	if err := ValidateChange(c); err != nil {
		return nil, fmt.Errorf("checking change: %w", err)
	}
	if tc := telemetry.Inject(ctx); tc != "" && len(c.Actions) > 0 {
		c.Actions = slices.Clone(c.Actions) // the caller's are its own
		for i := range c.Actions {
			if c.Actions[i].Trace == "" {
				c.Actions[i].Trace = tc
			}
		}
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

// End ends the commit's span with the group the change joined and its
// answer.
func (r *CommitRequest) End() {
	if r.span == nil {
		return
	}
	r.span.SetAttributes(attribute.Int("capblock.commit.group", r.Group))
	if r.Err != nil {
		r.span.RecordError(r.Err)
		r.span.SetStatus(codes.Error, "not committed")
	}
	r.span.End()
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
