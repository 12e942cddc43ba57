package service

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// ListBlocks returns a team's blocks, optionally in one state.
func (s *Service) ListBlocks(ctx context.Context, team string, state core.BlockState) ([]core.Block, error) {
	f := store.BlockFilter{Team: team}
	if state != "" {
		if !state.Valid() {
			return nil, core.Invalidf("unknown state %q; states: payment-pending, scheduled, active, expired, payment-failed, cancelled, failed", state)
		}
		f.States = []core.BlockState{state}
	}
	blocks, err := s.store.ListBlocks(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	return blocks, nil
}

// GetBlock returns one of a team's blocks; another team's is not found.
func (s *Service) GetBlock(ctx context.Context, team, id string) (core.Block, error) {
	b, err := s.store.GetBlock(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && team != "" && b.Team != team) {
		return core.Block{}, fmt.Errorf("%w: block %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Block{}, fmt.Errorf("loading block %s: %w", id, err)
	}
	return b, nil
}

// CancelBlock cancels a block before its start, or releases it early once
// active, refunding per the operator's policy. Its commit stores the
// release of the block's capacity on the engine, which the outbox worker
// applies (a no-op for a block that never became active).
func (s *Service) CancelBlock(ctx context.Context, team, id string) (core.Block, error) {
	return s.mutateRead(ctx, team, id, func(b core.Block) (blockDecision, error) {
		// What the cancellation reads besides the block, before the lock:
		// what its hours were paid, its hand-overs, and its plan, whose
		// transitions a cancelled segment may take.
		basis, err := s.cancelBasis(ctx, b)
		if err != nil {
			return nil, err
		}
		handovers, err := s.handoversOf(ctx, b.ID)
		if err != nil {
			return nil, err
		}
		plans, err := s.plansOf(ctx, b.PlanID)
		if err != nil {
			return nil, err
		}
		return func(now time.Time) (store.Change, error) {
			var c store.Change
			step, err := s.addCancel(&c, b, now, basis)
			if err != nil {
				return store.Change{}, err
			}
			if err := handedOnIn(handovers, b, "cancelled"); err != nil {
				return store.Change{}, err
			}
			// A plan fails with a cancelled segment.
			addPlanTransitions(&c, []transition{step}, plans)
			return c, nil
		}, nil
	})
}

// cancelBasis is what cancelling b may refund (refundBasis), for a live
// block; none for another, which a cancellation refuses.
func (s *Service) cancelBasis(ctx context.Context, b core.Block) (core.RefundBasis, error) {
	if !b.State.Live() {
		return core.RefundBasis{}, nil
	}
	return s.refundBasis(ctx, b)
}

// addCancel adds to c the cancellation of b now: its update, event,
// release and refund under the fleet's policy, of at most what b's team
// paid for its hours (basis, from cancelBasis). It returns the lifecycle
// step, for the plan's events. Callers hold mu.
func (s *Service) addCancel(c *store.Change, b core.Block, now time.Time, basis core.RefundBasis) (transition, error) {
	if !b.State.Live() {
		_, _, err := core.Cancel(b, now, s.fleet.Limits, core.RefundBasis{})
		return transition{}, err
	}
	cancelled, refund, err := core.Cancel(b, now, s.fleet.Limits, basis)
	if err != nil {
		return transition{}, err
	}
	c.Update = append(c.Update, store.BlockUpdate{Block: cancelled, ExpectedVersion: b.Version})
	c.Events = append(c.Events, s.event(now, core.EventBlockCancelled, cancelled, map[string]any{
		"from": string(b.State), "to": string(core.StateCancelled), "refund": refund.String(), "currency": refund.Currency,
	}))
	c.Actions = append(c.Actions, s.blockAction(core.ActionRelease, cancelled, b.Version+1))
	if refund.Minor > 0 {
		t, _ := s.fleet.Type(b.InstanceType)
		onDemand := core.OnDemandFee(t.OnDemand, b.DurationHours(), b.Count)
		onDemand.Minor = onDemand.Minor * refund.Minor / max(b.Fee.Minor, 1) // the refunded share
		c.Journals = append(c.Journals, refundJournal(core.JournalCancellation, now, b, refund, onDemand))
	}
	return transition{block: cancelled, Transition: core.Transition{Event: core.EventBlockCancelled, At: now}}, nil
}

// ApproveBlock approves a block waiting in payment-pending (admin): it is
// scheduled like any other.
func (s *Service) ApproveBlock(ctx context.Context, id string) (core.Block, error) {
	return s.mutate(ctx, "", id, func(b core.Block, now time.Time) (store.Change, error) {
		approved, err := core.Approve(b)
		if err != nil {
			return store.Change{}, err
		}
		return store.Change{
			Update: []store.BlockUpdate{{Block: approved, ExpectedVersion: b.Version}},
			Events: []core.Event{
				s.event(now, core.EventBlockApproved, approved, nil),
				s.event(now, core.EventBlockScheduled, approved, map[string]any{"from": string(core.StatePaymentPending), "to": string(core.StateScheduled)}),
			},
		}, nil
	})
}

// ExtensionOfferings quotes an extension of a block by d.
func (s *Service) ExtensionOfferings(ctx context.Context, team, id string, d time.Duration) ([]core.Offering, error) {
	b, err := s.GetBlock(ctx, team, id)
	if err != nil {
		return nil, err
	}
	if err := s.handedOn(ctx, b, "extended"); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var off core.Offering
	err = s.withLock(func() (err error) { // PlaceExtension may grow the index
		off, err = s.index.ExtensionOffer(b, d, now)
		return err
	})
	if errors.Is(err, core.ErrNoCapacity) {
		return []core.Offering{}, nil
	}
	if err != nil {
		return nil, err
	}
	off.Sign(s.secret)
	return []core.Offering{off}, nil
}

// Extend buys an extension offering: the block keeps its id and gets a
// later end; the fee quoted is charged. An extension offering extends
// once: bought again for the same block (an SDK's retry after a lost
// answer), it answers the extension it bought, whatever now stands in the
// way of buying it (the block's end moved, the quote used or expired), and
// charges nothing more; used otherwise it is refused
// (core.ErrOfferingUsed). The record of what an offering bought is looked
// up only when buying fails, off a first extension's path.
func (s *Service) Extend(ctx context.Context, team, id, offeringID string) (_ contract.Extension, err error) {
	ctx, end := traced(ctx, "service.extend", trace.SpanKindInternal, attribute.String("capblock.team", team), attribute.String("capblock.block", id))
	defer end(&err)
	now := s.clock.Now()
	off, err := core.VerifyOffering(s.secret, offeringID, core.KindExtension, now)
	if err != nil {
		if errors.Is(err, core.ErrOfferingExpired) && off.BlockID == id {
			if x, found, rerr := s.extensionBought(ctx, team, off); rerr != nil || found {
				return x, rerr
			}
		}
		return contract.Extension{}, quoteRefused(err, "ask for a fresh extension offering")
	}
	if off.BlockID != id {
		return contract.Extension{}, fmt.Errorf("%w: the extension offering is for block %s, not %s", core.ErrOfferingInvalid, off.BlockID, id)
	}
	var bought time.Time
	b, err := s.extendOnce(ctx, team, id, off, func(b core.Block, c *store.Change, now time.Time) {
		rec := extensionRecord(b, off, now)
		c.Idempotency = append(c.Idempotency, rec)
		bought = rec.CreatedAt
	})
	if err == nil {
		return extensionOf(b, off, bought), nil
	}
	if x, found, rerr := s.extensionBought(ctx, team, off); rerr != nil || found {
		return x, rerr
	}
	return contract.Extension{}, s.explainUsedQuote(ctx, offeringID, fmt.Sprintf("this extension offering already extended block %s "+
		"(an extension offering extends once); ask for a fresh one", id), err)
}

// extendOnce decides and commits an extension by a verified offering.
// with adds to the change what must commit with the extension (the
// record of what the offering bought).
func (s *Service) extendOnce(ctx context.Context, team, id string, off core.Offering,
	with func(b core.Block, c *store.Change, now time.Time)) (core.Block, error) {
	return s.mutateRead(ctx, team, id, func(b core.Block) (blockDecision, error) {
		// The team's quota and budget, read before the lock.
		q, err := s.effectiveQuota(ctx, b.Team, b.InstanceType)
		if err != nil {
			return nil, err
		}
		guardAt, err := s.budgetGuardAt(ctx, b.Team)
		if err != nil {
			return nil, err
		}
		// A block that handed its hours on ends where they begin: those
		// hours are another team's, or offered for resale, and extending
		// into them would hand them on twice.
		handovers, err := s.handoversOf(ctx, b.ID)
		if err != nil {
			return nil, err
		}
		return func(now time.Time) (store.Change, error) {
			if err := handedOnIn(handovers, b, "extended"); err != nil {
				return store.Change{}, err
			}
			return s.extension(b, off, q, guardAt(now), now, with)
		}, nil
	})
}

// extension decides the extension of b by off at now, under the team's
// quota q and budget guard. Callers hold mu.
func (s *Service) extension(b core.Block, off core.Offering, q core.Quota, guard *core.BudgetGuard, now time.Time,
	with func(b core.Block, c *store.Change, now time.Time)) (store.Change, error) {
	if !b.End.Equal(off.Start) {
		return store.Change{}, fmt.Errorf("%w: block %s now ends at %s, not at %s as quoted; ask for a fresh extension offering", core.ErrInvalidState, b.ID, b.End.Format(time.RFC3339), off.Start.Format(time.RFC3339))
	}
	if err := core.CheckExtension(b, off.End.Sub(off.Start), now, s.fleet.Limits); err != nil {
		return store.Change{}, err
	}
	if q.MaxDuration > 0 && off.End.Sub(b.Start) > q.MaxDuration {
		return store.Change{}, fmt.Errorf("%w: the extended block would last %dh, above the team's longest of %dh", core.ErrQuotaExceeded, int(off.End.Sub(b.Start)/time.Hour), int(q.MaxDuration/time.Hour))
	}
	if q.MaxInstancesHeld > 0 {
		if held := s.index.Held(b.Team, q.InstanceType, off.Start, off.End); held+b.Count > q.MaxInstancesHeld {
			return store.Change{}, fmt.Errorf("%w: the team would hold %d instances at once (%d already), above its limit of %d", core.ErrQuotaExceeded, held+b.Count, held, q.MaxInstancesHeld)
		}
	}
	plan, err := s.index.PlaceExtension(b, off.End, now)
	if err != nil {
		return store.Change{}, err
	}
	ext := b
	ext.End = off.End
	ext.Fee.Minor += off.Fee.Minor
	ext.Warned, ext.Terminating = false, false
	ext.Placements = plan.Placements
	c := store.Change{
		Update:    []store.BlockUpdate{{Block: ext, ExpectedVersion: b.Version, Replace: true, From: now}},
		Offerings: []string{off.ID},
		Journals:  []core.Journal{purchaseJournal(core.JournalExtension, now, b, off.Fee, off.OnDemandFee)},
		Events: []core.Event{s.event(now, core.EventBlockExtended, ext, map[string]any{
			"previousEndTime": b.End.Format(time.RFC3339), "endTime": ext.End.Format(time.RFC3339),
			"offeringId": off.ID, "fee": off.Fee.String(), "currency": off.Fee.Currency,
		})},
	}
	c.Budgets = guards(guard)
	s.addMoves(&c, plan.Moves, now)
	with(b, &c, now)
	if b.State == core.StateActive {
		// The engine holds the block until its new end (a Slurm
		// reservation's end moves): activating again is idempotent.
		c.Actions = s.activation(ext, b.Version+1)
	}
	return c, nil
}

// blockDecision decides a change of a block at now, under the lock, from
// the block and the index and from what was read of the store before.
type blockDecision func(now time.Time) (store.Change, error)

// mutate runs a decision on one of a team's blocks under the lock, takes
// it as assumed on the index, commits it without the lock and then
// confirms or forgets it, retrying on a fresh snapshot when the stored
// block moved (or another decision on it is in flight). decide reads
// nothing of the store; mutateRead is for a decision that does.
func (s *Service) mutate(ctx context.Context, team, id string, decide func(core.Block, time.Time) (store.Change, error)) (core.Block, error) {
	return s.mutateRead(ctx, team, id, func(b core.Block) (blockDecision, error) {
		return func(now time.Time) (store.Change, error) { return decide(b, now) }, nil
	})
}

// mutateRead is mutate for a decision that needs more of the store than
// the block: read, given the block as stored, reads it without the lock
// and returns the decision to take under the lock, or refuses. Each
// attempt reads again.
func (s *Service) mutateRead(ctx context.Context, team, id string, read func(core.Block) (blockDecision, error)) (core.Block, error) {
	for attempt := 1; ; attempt++ {
		b, err := s.GetBlock(ctx, team, id)
		if err != nil {
			return core.Block{}, err
		}
		var c store.Change
		decide, err := read(b)
		if err == nil {
			err = s.withLock(func() (err error) {
				if c, err = decide(s.clock.Now()); err == nil {
					s.addReserves(&c)
					err = s.assumeChange(c)
				}
				return err
			})
		}
		if err == nil {
			err = s.store.Commit(ctx, c)
			s.settle(changeKey(c), c, err)
			if err == nil && len(c.Actions) > 0 {
				s.kickOutbox()
			}
		}
		if err == nil {
			return s.GetBlock(ctx, team, id)
		}
		if store.IsConflict(err) && attempt == maxCommitAttempts {
			// The store's detail may name another team's block: it goes to
			// the log only.
			s.log.Warn("a block change kept conflicting with stored state", "block", id, "attempts", attempt, "err", err)
			return core.Block{}, fmt.Errorf("%w: block %s changed concurrently %d times in a row; try again", core.ErrConflict, id, attempt)
		}
		if !store.IsConflict(err) {
			return core.Block{}, fmt.Errorf("changing block %s: %w", id, err)
		}
	}
}

// assumeChange takes the blocks that a change inserts or updates as one
// decision in flight on the index, under the key changeKey gives it.
// Callers hold mu.
func (s *Service) assumeChange(c store.Change) error {
	blocks := make([]core.Block, 0, len(c.Insert)+len(c.Update))
	blocks = append(blocks, c.Insert...)
	for _, u := range c.Update {
		blocks = append(blocks, u.Block)
	}
	if len(blocks) == 0 {
		return nil
	}
	return s.index.AssumeAs(changeKey(c), blocks...)
}

// changeKey names the decision of a change: its first block's id.
func changeKey(c store.Change) string {
	if len(c.Insert) > 0 {
		return c.Insert[0].ID
	}
	if len(c.Update) > 0 {
		return c.Update[0].Block.ID
	}
	return ""
}

// BlockStatus reports a block's capacity and placement, and its engine
// actions.
func (s *Service) BlockStatus(ctx context.Context, team, id string) (contract.BlockStatus, error) {
	b, err := s.GetBlock(ctx, team, id)
	if err != nil {
		return contract.BlockStatus{}, err
	}
	actions, err := s.store.ActionsFor(ctx, b.ID)
	if err != nil {
		return contract.BlockStatus{}, fmt.Errorf("loading the engine actions of block %s: %w", b.ID, err)
	}
	for i := range actions {
		actions[i].Payload = nil
		if team != "" { // not an admin
			actions[i].LastError = ""
		}
	}
	now := s.clock.Now()
	st := contract.BlockStatus{
		Total:          b.Count,
		PlacementFinal: !b.Movable(now, s.fleet.Limits),
		LockInTime:     b.LockInTime(s.fleet.Limits),
		Placements:     b.Placements,
		Actions:        actions,
	}
	s.mu.RLock()
	st.Unavailable = s.unavailable(b)
	s.mu.RUnlock()
	if b.State == core.StateActive {
		st.Available = st.Total - st.Unavailable
	}
	st.Degraded = st.Unavailable > 0 && b.State.Live()
	return st, nil
}
