package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"capblock/internal/api"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Purchase buys an offering for a team. The same client token with the
// same request returns the block bought the first time (created false);
// with another request it is refused. The fee charged is the fee quoted.
func (s *Service) Purchase(ctx context.Context, req api.PurchaseRequest) (core.Block, bool, error) {
	hash := purchaseHash(req)
	return buyOnce(ctx, s, req.Team, req.ClientToken, hash, "purchase",
		func() (core.Block, error) { return s.purchaseOnce(ctx, req, hash) },
		func(id string) (core.Block, error) { return s.store.GetBlock(ctx, id) })
}

func (s *Service) purchaseOnce(ctx context.Context, req api.PurchaseRequest, hash string) (core.Block, error) {
	now := s.clock.Now()
	off, err := core.VerifyOffering(s.secret, req.OfferingID, core.KindBlock, now)
	if errors.Is(err, core.ErrOfferingExpired) {
		return core.Block{}, fmt.Errorf("%w: offering expired at %s; search again for a fresh quote", err, off.ExpiresAt.Format(time.RFC3339))
	}
	if err != nil {
		return core.Block{}, fmt.Errorf("%w: the offering id is malformed or was not issued by this server", err)
	}
	t, q, guard, err := s.buyerTerms(ctx, req.Team, off.InstanceType, now)
	if err != nil {
		return core.Block{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.index.CheckQuota(req.Team, q, off.Count, off.Start, off.End, now); err != nil {
		return core.Block{}, err
	}
	plan, err := s.index.Place(core.PlaceRequest{Type: t, Count: off.Count, Zone: off.Zone, Start: off.Start, End: off.End}, now)
	if err != nil {
		return core.Block{}, err
	}
	state, stateEvent := core.StateScheduled, core.EventBlockScheduled
	if core.NeedsApproval(off.Count, s.fleet.Limits) {
		state, stateEvent = core.StatePaymentPending, core.EventBlockPaymentPending // an admin approves it
	}
	b := core.Block{
		ID: newID("cb"), Name: req.Name, Team: req.Team, InstanceType: t.Name, GPUModel: t.GPUModel,
		Count: off.Count, Zone: off.Zone, Start: off.Start, End: off.End, State: state,
		Fee: off.Fee, CreatedAt: now, Tags: req.Tags, Placements: plan.Placements,
	}
	c := store.Change{
		Insert: []core.Block{b},
		Idempotency: []store.IdempotencyRecord{{
			Team: req.Team, ClientToken: req.ClientToken, RequestHash: hash, Subject: b.ID, CreatedAt: now,
		}},
		Ledger: []core.LedgerEntry{{ID: newID("le"), Team: req.Team, Time: now, Kind: core.LedgerCharge, Amount: b.Fee, Subject: b.ID,
			InstanceType: t.Name, OnDemand: off.OnDemandFee}},
		Events: []core.Event{
			s.event(now, core.EventBlockPurchased, b, map[string]any{"offeringId": off.ID, "upfrontFee": b.Fee.String(), "currency": b.Fee.Currency}),
			s.event(now, stateEvent, b, map[string]any{"from": string(core.StatePaymentPending), "to": string(state)}),
		},
	}
	c.Budgets = guards(guard)
	s.addMoves(&c, plan.Moves, now)
	if err := s.commitAudited(ctx, c, now, http.StatusCreated, b.ID); err != nil {
		return core.Block{}, fmt.Errorf("storing block %s: %w", b.ID, err)
	}
	b.Version = 1
	s.applyCommitted(c)
	return b, nil
}

// buyerTerms loads what a purchase of instanceType by team is checked
// against: the type, still sold, the team's quota for it and its budget
// guard (nil without a budget).
func (s *Service) buyerTerms(ctx context.Context, team, instanceType string, now time.Time) (core.InstanceType, core.Quota, *core.BudgetGuard, error) {
	t, ok := s.fleet.Type(instanceType)
	if !ok {
		return core.InstanceType{}, core.Quota{}, nil, fmt.Errorf("%w: instance type %s is no longer sold", core.ErrOfferingInvalid, instanceType)
	}
	q, err := s.effectiveQuota(ctx, team, t.Name)
	if err != nil {
		return core.InstanceType{}, core.Quota{}, nil, err
	}
	guard, err := s.budgetGuard(ctx, team, now)
	if err != nil {
		return core.InstanceType{}, core.Quota{}, nil, err
	}
	return t, q, guard, nil
}

// commitAudited commits c together with the audit record of the request
// of ctx, when it has one, as a success with status about subject: the
// change is then never durable without its record, and the request costs
// one transaction instead of two.
func (s *Service) commitAudited(ctx context.Context, c store.Change, now time.Time, status int, subject string) error {
	a := api.PendingAudit(ctx)
	if a != nil {
		c.Audit = append(c.Audit, a.Take(now, status, subject))
	}
	if err := s.store.Commit(ctx, c); err != nil {
		return err
	}
	if a != nil {
		a.Stored()
	}
	return nil
}

// addMoves adds tentative blocks that a decision re-placed to a change.
func (s *Service) addMoves(c *store.Change, moves []core.Block, now time.Time) {
	for _, m := range moves {
		c.Update = append(c.Update, store.BlockUpdate{Block: m, ExpectedVersion: m.Version, Replace: true})
		c.Events = append(c.Events, s.event(now, core.EventBlockMoved, m, map[string]any{"nodes": nodeNames(m.Placements)}))
	}
}

// applyCommitted brings the index up to date with a committed change.
// Callers hold mu.
func (s *Service) applyCommitted(c store.Change) {
	for _, b := range c.Insert {
		b.Version = 1
		if err := s.index.Add(b); err != nil {
			s.log.Error("indexing a committed block", "block", b.ID, "err", err)
		}
	}
	for _, u := range c.Update {
		b := u.Block
		b.Version = u.ExpectedVersion + 1
		if err := s.index.Add(b); err != nil {
			s.log.Error("indexing a committed block", "block", b.ID, "err", err)
		}
	}
	if len(c.Events) > 0 {
		s.notifyEvents()
	}
}

func (s *Service) event(at time.Time, typ string, b core.Block, data map[string]any) core.Event {
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: b.ID, Team: b.Team, Data: data}
}

// purchaseHash identifies the parameters of a purchase for idempotency.
func purchaseHash(req api.PurchaseRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n%q\n", req.OfferingID, req.Name)
	keys := make([]string, 0, len(req.Tags))
	for k := range req.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%q=%q\n", k, req.Tags[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func nodeNames(pls []core.Placement) []string {
	out := make([]string, len(pls))
	for i, p := range pls {
		out[i] = p.Node
	}
	return out
}
