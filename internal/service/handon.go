package service

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Handing hours on. A block's hours from an hour h on (its start when it
// has not started, else the next whole hour: core.HandOnFrom) leave the
// holder by a split, never by changing the block's team:
//
//   - the holder's block keeps the hours before h: it ends at h (its
//     workloads stop before h as at any end, and the engine's hold of it
//     ends there), or is cancelled when h is its start;
//   - a transfer gives the receiving team a new block on the same GPUs
//     from h to the end, scheduled, which becomes active at h like any
//     block, so the engine's reservation, labels and jobs follow its team;
//   - a release gives the GPUs back to the index: searches offer them,
//     and a purchase that takes them credits the holder (resaleCredits).
//
// Both commit in one change with a hand-over row that records what was
// handed on, so the store re-checks the split like any decision (no GPU
// in two live blocks) and every replica sees it. The holder's fee stays
// where it was paid; the holder's block can no longer be cancelled, so
// no refund is paid twice for the same hours. The received block's fee
// is the share of the holder's fee for its hours (what the operator was
// paid for them): a refund or resale credit of it never pays out more
// than was paid in. A price, when set, is a separate charge on the
// receiver and credit to the holder.

// TransferBlock hands a block's hours on to another team, where the
// fleet's policy allows (core.Limits.Transfers).
func (s *Service) TransferBlock(ctx context.Context, req contract.TransferRequest) (contract.HandOnResult, error) {
	// 1. The block, in the caller's scope (another team's is not found),
	//    then the policy, the receiving team and the price.
	b0, err := s.GetBlock(ctx, req.Scope, req.BlockID)
	if err != nil {
		return contract.HandOnResult{}, err
	}
	switch s.fleet.Limits.Transfers {
	case core.TransfersNone:
		return contract.HandOnResult{}, fmt.Errorf("%w: this fleet allows no transfers of blocks (limits.transfers: none)", core.ErrForbidden)
	case core.TransfersAdmin:
		if req.Scope != "" {
			return contract.HandOnResult{}, fmt.Errorf("%w: on this fleet only an admin transfers blocks (limits.transfers: admin); ask an admin", core.ErrForbidden)
		}
	}
	if req.ToTeam == "" {
		return contract.HandOnResult{}, core.Invalidf("name the team to transfer the block to")
	}
	if _, err := s.Team(ctx, "", req.ToTeam); err != nil {
		return contract.HandOnResult{}, err
	}
	price := req.Price
	if price.Currency == "" {
		price.Currency = s.fleet.Currency
	}
	if price.Minor < 0 || price.Currency != s.fleet.Currency {
		return contract.HandOnResult{}, core.Invalidf("price %s %s: a transfer's price is zero or more, in %s", price.String(), price.Currency, s.fleet.Currency)
	}
	// 2. What the receiving team is checked against.
	q, err := s.effectiveQuota(ctx, req.ToTeam, b0.InstanceType)
	if err != nil {
		return contract.HandOnResult{}, err
	}
	var guard *core.BudgetGuard
	if price.Minor > 0 {
		if guard, err = s.budgetGuard(ctx, req.ToTeam, s.clock.Now()); err != nil {
			return contract.HandOnResult{}, err
		}
	}
	// 3. Decide, commit, confirm (mutate).
	var res contract.HandOnResult
	kept, err := s.mutate(ctx, req.Scope, req.BlockID, func(b core.Block, now time.Time) (store.Change, error) {
		if b.Team == req.ToTeam {
			return store.Change{}, core.Invalidf("block %s is already team %s's", b.ID, b.Team)
		}
		h, err := core.HandOnFrom(b, now, s.fleet.Limits)
		if err != nil {
			return store.Change{}, err
		}
		if err := s.index.CheckQuota(req.ToTeam, q, b.Count, h, b.End, now); err != nil {
			return store.Change{}, fmt.Errorf("team %s cannot take the block: %w", req.ToTeam, err)
		}
		kept := core.KeepUntil(b, h)
		recv := core.Received(b, h, newID("cb"), req.ToTeam, s.feeShare(b, h), now)
		ho := s.handover(core.HandOverTransfer, b, h, now)
		ho.ToTeam, ho.ToBlockID, ho.Price = recv.Team, recv.ID, price
		c := store.Change{
			Update:    []store.BlockUpdate{{Block: kept, ExpectedVersion: b.Version}},
			Insert:    []core.Block{recv},
			Handovers: []store.HandoverWrite{{Handover: ho}},
			Events: []core.Event{
				s.event(now, core.EventBlockTransferred, kept, map[string]any{"from": string(b.State), "to": string(kept.State),
					"toTeam": recv.Team, "toBlockId": recv.ID, "handedOnFrom": h.Format(time.RFC3339),
					"price": price.String(), "currency": price.Currency}),
				s.event(now, core.EventBlockReceived, recv, map[string]any{"fromTeam": b.Team,
					"startTime": h.Format(time.RFC3339), "price": price.String(), "currency": price.Currency}),
				s.event(now, core.EventBlockScheduled, recv, map[string]any{"to": string(core.StateScheduled)}),
			},
			Actions: s.keptActions(b, kept),
		}
		if j := transferJournal(now, b, recv, recv.Fee, s.onDemandOf(b, ho.GPUHours), price); j != nil {
			c.Journals = []core.Journal{*j}
		}
		if price.Minor > 0 {
			c.Budgets = guards(guard)
		}
		res = contract.HandOnResult{Received: &recv, Handover: handoverView(ho, "")}
		return c, nil
	})
	if err != nil {
		return contract.HandOnResult{}, err
	}
	res.Block = kept
	if recv, err := s.store.GetBlock(ctx, res.Received.ID); err == nil {
		res.Received = &recv
	}
	return res, nil
}

// ReleaseBlock releases a block's hours for resale: the holder keeps
// the hours before the hand-over hour, the GPUs are free again after
// it, and the holder is credited when a purchase takes them.
func (s *Service) ReleaseBlock(ctx context.Context, team, id string) (contract.HandOnResult, error) {
	var res contract.HandOnResult
	kept, err := s.mutate(ctx, team, id, func(b core.Block, now time.Time) (store.Change, error) {
		h, err := core.HandOnFrom(b, now, s.fleet.Limits)
		if err != nil {
			return store.Change{}, err
		}
		kept := core.KeepUntil(b, h)
		ho := s.handover(core.HandOverRelease, b, h, now)
		res.Handover = handoverView(ho, "")
		return store.Change{
			Update:    []store.BlockUpdate{{Block: kept, ExpectedVersion: b.Version}},
			Handovers: []store.HandoverWrite{{Handover: ho}},
			Events: []core.Event{s.event(now, core.EventBlockReleased, kept, map[string]any{
				"from": string(b.State), "to": string(kept.State), "handedOnFrom": h.Format(time.RFC3339),
				"gpuHours": ho.GPUHours, "resaleFeePercent": ho.FeePercent,
			})},
			Actions: s.keptActions(b, kept),
		}, nil
	})
	if err != nil {
		return contract.HandOnResult{}, err
	}
	res.Block = kept
	return res, nil
}

// handover is the record of b's hours from h handed on at now.
func (s *Service) handover(kind string, b core.Block, h, now time.Time) store.Handover {
	zero := core.Money{Currency: b.Fee.Currency}
	return store.Handover{ID: newID("ho"), Kind: kind, BlockID: b.ID, Team: b.Team, GPUModel: b.GPUModel,
		From: h, Until: b.End, Placements: b.Placements, GPUHours: core.GPUHours(b.Placements, h, b.End),
		Price: zero, Fee: b.Fee, BoughtGPUHours: core.GPUHours(b.Placements, b.Start, b.End),
		FeePercent: s.fleet.Limits.ResaleFeePercent, Credited: zero, CreatedAt: now}
}

// feeShare is the share of b's fee for its hours from h.
func (s *Service) feeShare(b core.Block, h time.Time) core.Money {
	all := core.GPUHours(b.Placements, b.Start, b.End)
	if all == 0 {
		return core.Money{Currency: b.Fee.Currency}
	}
	return core.Money{Minor: b.Fee.Minor * core.GPUHours(b.Placements, h, b.End) / all, Currency: b.Fee.Currency}
}

// onDemandOf is what gpuHours of b's type cost on demand.
func (s *Service) onDemandOf(b core.Block, gpuHours int64) core.Money {
	t, _ := s.fleet.Type(b.InstanceType)
	per := int64(max(t.GPUsPerInstance, 1))
	return core.Money{Minor: t.OnDemand.Minor * gpuHours / per, Currency: t.OnDemand.Currency}
}

// keptActions are the engine actions of the holder's block once its
// hours are handed on: a release when it keeps nothing, otherwise, when
// it is active, an activation again so that the engine's hold of it
// ends at its new end (activating again is idempotent, as on an
// extension).
func (s *Service) keptActions(was, kept core.Block) []core.Action {
	switch {
	case kept.State == core.StateCancelled:
		return []core.Action{s.blockAction(core.ActionRelease, kept, was.Version+1)}
	case kept.State == core.StateActive:
		return s.activeActions(kept, was.Version+1)
	}
	return nil
}

// handedOn refuses a change to a block that handed its hours on: it
// keeps only hours before the hand-over, already paid for, and a
// cancellation would refund them a second time. It reads the store:
// under the lock, check what handoversOf read before with handedOnIn.
func (s *Service) handedOn(ctx context.Context, b core.Block, what string) error {
	hs, err := s.handoversOf(ctx, b.ID)
	if err != nil {
		return err
	}
	return handedOnIn(hs, b, what)
}

// handoversOf reads the hand-overs of a block, from it or to it.
func (s *Service) handoversOf(ctx context.Context, id string) ([]store.Handover, error) {
	hs, err := s.store.HandoversOf(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading the hand-overs of block %s: %w", id, err)
	}
	return hs, nil
}

// handedOnIn is handedOn on hs, the hand-overs of b as read before.
func handedOnIn(hs []store.Handover, b core.Block, what string) error {
	for _, h := range hs {
		if h.BlockID == b.ID {
			return fmt.Errorf("%w: block %s handed its hours from %s on (%s); it can no longer be %s",
				core.ErrInvalidState, b.ID, h.From.Format(time.RFC3339), h.Kind, what)
		}
	}
	return nil
}

// resaleCredits adds to a purchase's change, for each open release whose
// GPU-hours the new blocks take, the resale: the release's resold hours
// grow (checked against its version at commit), the holder is credited
// its fee's share of them less the resale fee, and told so by an event
// (which names no buyer). A release credits at most the GPU-hours it
// released. The blocks are one purchase's (a block, or a plan's
// segments), so each release is written once.
func (s *Service) resaleCredits(c *store.Change, blocks []core.Block, releases []store.Handover, now time.Time) {
	for _, r := range releases {
		var ov int64
		for _, b := range blocks {
			ov += core.OverlapGPUHours(b.Placements, b.Start, b.End, r.Placements, r.From, r.Until)
		}
		take := min(ov, r.GPUHours-r.ResoldGPUHours)
		if take <= 0 {
			continue
		}
		credit := core.ResaleCredit(r.Fee, r.BoughtGPUHours, r.ResoldGPUHours, r.ResoldGPUHours+take, r.FeePercent)
		sold := r
		sold.ResoldGPUHours += take
		sold.Credited.Minor += credit.Minor
		c.Handovers = append(c.Handovers, store.HandoverWrite{Handover: sold, ExpectedVersion: r.Version})
		holder := core.Block{ID: r.BlockID, Team: r.Team}
		c.Events = append(c.Events, s.event(now, core.EventBlockResold, holder, map[string]any{
			"handoverId": r.ID, "gpuHours": take, "credit": credit.String(), "currency": credit.Currency,
			"resaleFeePercent": r.FeePercent,
		}))
		// What the released hours were paid leaves the holder's escrow:
		// the credit to the holder, the resale fee to the operator.
		if share := core.ResaleCredit(r.Fee, r.BoughtGPUHours, r.ResoldGPUHours, r.ResoldGPUHours+take, 0); share.Minor > 0 {
			c.Journals = append(c.Journals, resaleJournal(now, r, blocks[0].InstanceType, share, credit, s.onDemandOf(blocks[0], take)))
		}
	}
}

// openReleases reads the releases a purchase of gpuModel over [start,
// end) may resell; a failure to read them is the purchase's.
func (s *Service) openReleases(ctx context.Context, gpuModel string, start, end time.Time) ([]store.Handover, error) {
	rs, err := s.store.OpenReleases(ctx, gpuModel, start, end)
	if err != nil {
		return nil, fmt.Errorf("reading the capacity released for resale: %w", err)
	}
	return rs, nil
}

// BlockDetail shows a block's hand-overs and its utilisation so far.
func (s *Service) BlockDetail(ctx context.Context, team, id string) (contract.BlockDetail, error) {
	b, err := s.GetBlock(ctx, team, id)
	if err != nil {
		return contract.BlockDetail{}, err
	}
	hs, err := s.store.HandoversOf(ctx, b.ID)
	if err != nil {
		return contract.BlockDetail{}, fmt.Errorf("reading the hand-overs of block %s: %w", b.ID, err)
	}
	d := contract.BlockDetail{Handovers: []contract.Handover{}}
	for _, h := range hs {
		d.Handovers = append(d.Handovers, handoverView(h, team))
	}
	u, err := s.blockUtilisation(ctx, b)
	if err != nil {
		return contract.BlockDetail{}, err
	}
	d.Utilisation = contract.GPUHoursOf(u)
	return d, nil
}

// handoverView shows a hand-over to scope: the other team of a transfer
// is named only to an admin ("") and the teams it names; a release's
// credits only to its holder.
func handoverView(h store.Handover, scope string) contract.Handover {
	v := contract.Handover{ID: h.ID, Kind: h.Kind, BlockID: h.BlockID, Team: h.Team, ToTeam: h.ToTeam, ToBlockID: h.ToBlockID,
		From: h.From, Until: h.Until, GPUHours: h.GPUHours, Price: h.Price, FeePercent: h.FeePercent,
		ResoldGPUHours: h.ResoldGPUHours, Credited: h.Credited, CreatedAt: h.CreatedAt}
	if scope != "" && scope != h.Team {
		// The receiver of a transfer sees where its block came from, not
		// the holder's block or its credits.
		v.BlockID, v.Credited = "", core.Money{Currency: h.Credited.Currency}
	}
	return v
}
