package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/backend"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/telemetry"
)

// Purchase buys an offering for a team. The same client token with the
// same request returns the block bought the first time (created false);
// with another request it is refused. An offering buys one block: under
// another client token it is refused (core.ErrOfferingUsed). The fee
// charged is the fee quoted.
func (s *Service) Purchase(ctx context.Context, req contract.PurchaseRequest) (_ core.Block, _ bool, err error) {
	ctx, end := traced(ctx, "service.purchase", trace.SpanKindInternal, attribute.String("capblock.team", req.Team))
	defer end(&err)
	if err := checkNameAndTags(req.Name, req.Tags); err != nil {
		return core.Block{}, false, err
	}
	hash := purchaseHash(req)
	return buyOnce(ctx, s, req.Team, req.ClientToken, hash, "purchase",
		func() (core.Block, error) {
			b, err := s.purchaseOnce(ctx, req, hash, nil)
			return b, s.explainUsedQuote(ctx, req.OfferingID, "this quote already bought a block (a quote buys one); "+
				"search again for a new quote, or repeat the first purchase's clientToken to get its block", err)
		},
		func(id string) (core.Block, error) { return s.store.GetBlock(ctx, id) })
}

// purchaseOnce decides and commits one purchase. with, when set, adds
// to the purchase's change what must commit with it (a standing order
// that the block serves), or refuses it.
func (s *Service) purchaseOnce(ctx context.Context, req contract.PurchaseRequest, hash string,
	with func(b core.Block, c *store.Change, now time.Time) error) (core.Block, error) {
	now := s.clock.Now()
	off, err := core.VerifyOffering(s.secret, req.OfferingID, core.KindBlock, now)
	if err != nil {
		return core.Block{}, quoteRefused(err, "search again for a fresh quote")
	}
	t, q, guard, err := s.buyerTerms(ctx, req.Team, off.InstanceType, now)
	if err != nil {
		return core.Block{}, err
	}
	releases, err := s.openReleases(ctx, t.GPUModel, off.Start, off.End)
	if err != nil {
		return core.Block{}, err
	}
	// 1. Decide under the lock, and take the decision as assumed: a
	//    search or another purchase sees its GPUs as taken from now on.
	b, c, err := func() (b core.Block, c store.Change, err error) {
		s.mu.Lock()
		defer s.mu.Unlock() // a panic too leaves the lock free
		var plan core.PlacementPlan
		err = s.decideLocked(want{t.GPUModel, off.Zone}, func() error {
			if err := s.index.CheckQuota(req.Team, q, off.Count, off.Start, off.End, now); err != nil {
				return err
			}
			plan, err = s.index.Place(core.PlaceRequest{Type: t, Count: off.Count, Zone: off.Zone, Start: off.Start, End: off.End}, now)
			return err
		})
		if err != nil {
			return core.Block{}, store.Change{}, err
		}
		state, stateEvent := core.StateScheduled, core.EventBlockScheduled
		if core.NeedsApproval(off.Count, s.fleet.Limits) {
			state, stateEvent = core.StatePaymentPending, core.EventBlockPaymentPending // an admin approves it
		}
		b = core.Block{
			ID: newID("cb"), Name: req.Name, Team: req.Team, InstanceType: t.Name, GPUModel: t.GPUModel,
			Count: off.Count, Zone: off.Zone, Start: off.Start, End: off.End, State: state,
			Fee: off.Fee, CreatedAt: now, Tags: req.Tags, Placements: plan.Placements,
		}
		c = store.Change{
			Insert:    []core.Block{b},
			Offerings: []string{off.ID},
			Idempotency: []store.IdempotencyRecord{{
				Team: req.Team, ClientToken: req.ClientToken, RequestHash: hash, Subject: b.ID, CreatedAt: now,
			}},
			Journals: []core.Journal{purchaseJournal(core.JournalPurchase, now, b, b.Fee, off.OnDemandFee)},
			Events: []core.Event{
				s.event(now, core.EventBlockPurchased, b, map[string]any{"offeringId": off.ID, "upfrontFee": b.Fee.String(), "currency": b.Fee.Currency}),
				s.event(now, stateEvent, b, map[string]any{"from": string(core.StatePaymentPending), "to": string(state)}),
			},
		}
		c.Budgets = guards(guard)
		s.resaleCredits(&c, []core.Block{b}, releases, now)
		if with != nil {
			if err := with(b, &c, now); err != nil {
				return core.Block{}, store.Change{}, err
			}
		}
		s.addMoves(&c, plan.Moves, now)
		s.addReserves(&c)
		if err := s.index.Assume(b, plan.Moves...); err != nil {
			return core.Block{}, store.Change{}, err
		}
		return b, c, nil
	}()
	if err != nil {
		return core.Block{}, err
	}
	// 2. Commit without the lock: searches never wait for a disk.
	err = s.commitAudited(ctx, c, now, b.ID)
	// 3. Confirm the decision, or forget it.
	s.settle(b.ID, c, err)
	if err != nil {
		return core.Block{}, fmt.Errorf("storing block %s: %w", b.ID, err)
	}
	b.Version = 1
	return b, nil
}

// settle ends a decision that was assumed under key once its commit has
// run: on success the index confirms it and takes the committed
// versions, on failure it forgets it, as if it had never been decided.
//
// A commit that failed otherwise than by a conflict may have been stored
// all the same (its answer lost after it was durable): the blocks it
// changed are read back from the store, and what is stored is indexed.
func (s *Service) settle(key string, c store.Change, commitErr error) {
	s.settleIndex(key, c, commitErr)
	if commitErr != nil && !store.IsConflict(commitErr) {
		s.indexStored(c)
	}
}

func (s *Service) settleIndex(key string, c store.Change, commitErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.settled.Broadcast()
	if commitErr != nil {
		s.index.Forget(key)
		return
	}
	s.index.Confirm(key)
	s.applyCommitted(c)
}

// indexStored reads the blocks of change c from the store and indexes
// the versions stored, after a commit whose outcome is unknown. A block
// that cannot be read is left to the next rebuild, and logged.
func (s *Service) indexStored(c store.Change) {
	ids := make([]string, 0, len(c.Insert)+len(c.Update))
	for _, b := range c.Insert {
		ids = append(ids, b.ID)
	}
	for _, u := range c.Update {
		ids = append(ids, u.Block.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var stored []core.Block
	for _, id := range ids {
		b, err := s.store.GetBlock(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // not stored: forgetting it was right
		case err != nil:
			s.log.Warn("reading back a block whose commit failed; the index follows it at its next rebuild", "block", id, "err", err)
			continue
		}
		stored = append(stored, b)
	}
	if len(stored) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range stored {
		if _, err := s.indexCommitted(b); err != nil {
			s.log.Error("indexing a block whose commit failed but was stored", "block", b.ID, "err", err)
		}
	}
}

// checkNameAndTags refuses a name or tags that are not printable text
// (core.CheckPrintable), naming the field.
func checkNameAndTags(name string, tags map[string]string) error {
	if err := core.CheckPrintable("name", name); err != nil {
		return err
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad tag in a stable order
	for _, k := range keys {
		if err := core.CheckPrintable(fmt.Sprintf("tag key %q", k), k); err != nil {
			return err
		}
		if err := core.CheckPrintable(fmt.Sprintf("tags[%q]", k), tags[k]); err != nil {
			return err
		}
	}
	return nil
}

// quoteRefused explains why core refused a quote, with what to do next
// when it expired.
func quoteRefused(err error, next string) error {
	if errors.Is(err, core.ErrOfferingExpired) {
		return fmt.Errorf("%w; %s", err, next)
	}
	return err
}

// explainUsedQuote turns the failure of a purchase of quote offeringID
// into ErrOfferingUsed, saying why (what the quote bought, what to do
// next), when the quote was already used: the commit found it so, or the
// decision failed on the capacity, quota, budget or block state that the
// first purchase of the quote most likely changed, and it could not
// succeed anyway. The record is read only then, off a first purchase's
// path. Other failures are returned as they are.
func (s *Service) explainUsedQuote(ctx context.Context, offeringID, why string, err error) error {
	used := errors.Is(err, core.ErrOfferingUsed)
	if !used && (errors.Is(err, core.ErrNoCapacity) || errors.Is(err, core.ErrQuotaExceeded) ||
		errors.Is(err, core.ErrBudgetExceeded) || errors.Is(err, core.ErrInvalidState)) {
		var rerr error
		if used, rerr = s.store.OfferingUsed(ctx, offeringID); rerr != nil {
			s.log.Warn("looking up whether a quote was used", "err", rerr)
		}
	}
	if !used {
		return err
	}
	return fmt.Errorf("%w: %s", core.ErrOfferingUsed, why)
}

// buyerTerms loads what a purchase of instanceType by team is checked
// against: the type, still sold, the team, not disabled, its quota for
// the type and its budget guard (nil without a budget).
func (s *Service) buyerTerms(ctx context.Context, team, instanceType string, now time.Time) (core.InstanceType, core.Quota, *core.BudgetGuard, error) {
	t, ok := s.fleet.Type(instanceType)
	if !ok {
		return core.InstanceType{}, core.Quota{}, nil, fmt.Errorf("%w: instance type %s is no longer sold", core.ErrOfferingInvalid, instanceType)
	}
	if err := s.checkTeamEnabled(ctx, team, core.ErrInvalidState); err != nil {
		return core.InstanceType{}, core.Quota{}, nil, err
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
// of ctx, when it has one, as a success about subject: the change is then
// never durable without its record, and the request costs one transaction
// instead of two.
func (s *Service) commitAudited(ctx context.Context, c store.Change, now time.Time, subject string) error {
	if tc := telemetry.Inject(ctx); tc != "" {
		for i := range c.Insert { // the blocks this decision buys
			c.Insert[i].Trace = tc
		}
	}
	a := contract.PendingAudit(ctx)
	if a != nil {
		c.Audit = append(c.Audit, a.Succeeded(now, subject))
	}
	if err := s.store.Commit(ctx, c); err != nil {
		return err
	}
	if a != nil {
		a.MarkStored()
	}
	if len(c.Actions) > 0 {
		s.kickOutbox()
	}
	return nil
}

// addReserves adds to c a reserve action for each block it stores that
// waits for its start (scheduled, or payment-pending: holding capacity),
// when the backend holds capacity ahead (backend.Reserver): a new block,
// or one whose placement or window the change moves. A block's actions
// apply in order, so the engine ends up with the last one.
func (s *Service) addReserves(c *store.Change) {
	if _, ok := s.backend.(backend.Reserver); !ok {
		return
	}
	waits := func(b core.Block) bool { return b.State == core.StateScheduled || b.State == core.StatePaymentPending }
	for _, b := range c.Insert {
		if waits(b) {
			c.Actions = append(c.Actions, s.blockAction(core.ActionReserve, b, 1))
		}
	}
	for _, u := range c.Update {
		if waits(u.Block) {
			c.Actions = append(c.Actions, s.blockAction(core.ActionReserve, u.Block, u.ExpectedVersion+1))
		}
	}
}

// addMoves adds tentative blocks that a decision re-placed to a change.
func (s *Service) addMoves(c *store.Change, moves []core.Block, now time.Time) {
	for _, m := range moves {
		c.Update = append(c.Update, store.BlockUpdate{Block: m, ExpectedVersion: m.Version, Replace: true, From: now})
		c.Events = append(c.Events, s.event(now, core.EventBlockMoved, m, map[string]any{"nodes": nodeNames(m.Placements)}))
	}
}

// applyCommitted brings the index up to date with a committed change.
// Callers hold mu.
func (s *Service) applyCommitted(c store.Change) {
	for _, b := range c.Insert {
		b.Version = 1
		if _, err := s.indexCommitted(b); err != nil {
			s.log.Error("indexing a committed block", "block", b.ID, "err", err)
		}
	}
	freed := false
	for _, u := range c.Update {
		b := u.Block
		b.Version = u.ExpectedVersion + 1
		if _, err := s.indexCommitted(b); err != nil {
			s.log.Error("indexing a committed block", "block", b.ID, "err", err)
		}
		freed = freed || !b.State.Live()
	}
	if len(c.Events) > 0 {
		s.notifyEvents()
	}
	if freed {
		s.kickOrders() // a block ended or was cancelled: standing orders may fit
	}
}

func (s *Service) event(at time.Time, typ string, b core.Block, data map[string]any) core.Event {
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: b.ID, Team: b.Team, Data: data}
}

// purchaseHash identifies the parameters of a purchase for idempotency.
func purchaseHash(req contract.PurchaseRequest) string {
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
