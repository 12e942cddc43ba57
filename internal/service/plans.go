package service

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// PlanOfferings searches plan offerings and signs them. When req names a
// team, each segment respects its effective quota, as its purchase would.
func (s *Service) PlanOfferings(ctx context.Context, req core.PlanSearchRequest) ([]core.PlanOffering, error) {
	if req.Zone != "" && !s.knownZone(req.Zone) {
		return nil, core.Invalidf("unknown zone %q", req.Zone)
	}
	quotas, err := s.searchQuotas(ctx, req.Team, []string{req.Type})
	if err != nil {
		return nil, err
	}
	if q, ok := quotas[req.Type]; ok {
		req.Quota = &q
	}
	s.mu.RLock()
	offers, err := s.index.SearchPlans(req, s.clock.Now())
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	for i := range offers {
		offers[i].Sign(s.secret)
	}
	return offers, nil
}

// PurchasePlan buys a plan offering for a team: every segment becomes a
// scheduled block carrying the plan's id, stored with the plan in one
// commit, or nothing is stored. The same client token with the same
// request returns the plan bought the first time (created false); with
// another request it is refused. An offering buys one plan: under another
// client token it is refused (core.ErrOfferingUsed). Each segment is
// charged its quoted fee.
func (s *Service) PurchasePlan(ctx context.Context, req contract.PlanPurchaseRequest) (_ contract.PlanView, _ bool, err error) {
	ctx, end := traced(ctx, "service.purchase_plan", trace.SpanKindInternal, attribute.String("capblock.team", req.Team))
	defer end(&err)
	if err := core.CheckPrintable("name", req.Name); err != nil {
		return contract.PlanView{}, false, err
	}
	hash := planPurchaseHash(req)
	return buyOnce(ctx, s, req.Team, req.ClientToken, hash, "plan purchase",
		func() (contract.PlanView, error) {
			p, err := s.purchasePlanOnce(ctx, req, hash)
			if err != nil {
				return contract.PlanView{}, s.explainUsedQuote(ctx, req.OfferingID, "this quote already bought a plan (a quote buys one); "+
					"search again for a new quote, or repeat the first purchase's clientToken to get its plan", err)
			}
			return s.planView(ctx, p), nil
		},
		func(id string) (contract.PlanView, error) {
			p, err := s.store.Plan(ctx, id)
			if err != nil {
				return contract.PlanView{}, err
			}
			return s.planView(ctx, p), nil
		})
}

func (s *Service) purchasePlanOnce(ctx context.Context, req contract.PlanPurchaseRequest, hash string) (core.Plan, error) {
	// 1. Verify the quote and load what the checks need.
	now := s.clock.Now()
	off, err := core.VerifyPlanOffering(s.secret, req.OfferingID, now)
	if err != nil {
		return core.Plan{}, quoteRefused(err, "search again for a fresh quote")
	}
	t, q, guard, err := s.buyerTerms(ctx, req.Team, off.InstanceType, now)
	if err != nil {
		return core.Plan{}, err
	}
	releases, err := s.openReleases(ctx, t.GPUModel, off.Segments[0].Start, off.Segments[len(off.Segments)-1].End)
	if err != nil {
		return core.Plan{}, err
	}
	p := core.Plan{ID: newID("tp"), Name: req.Name, Team: req.Team, Target: off.Target, Fee: off.Fee(), CreatedAt: now}
	var pp *planPlacement
	err = s.withLock(func() error {
		window := want{t.GPUModel, off.Zone}
		return s.decideLocked(window, func() error {
			// 2. Each segment must pass the team's quota, like a block.
			for i, sg := range off.Segments {
				if err := s.index.CheckQuota(req.Team, q, off.Count, sg.Start, sg.End, now); err != nil {
					return fmt.Errorf("segment %d of the plan: %w", i+1, err)
				}
			}
			// 3. Place the segments one after another on the index, each
			//    assumed under the plan's id so that the next sees it; the
			//    whole decision is forgotten unless the commit succeeds.
			pp = &planPlacement{ix: s.index, key: p.ID}
			for i, sg := range off.Segments {
				b := core.Block{
					ID: newID("cb"), Name: segmentName(req.Name, i, len(off.Segments)), Team: req.Team,
					InstanceType: t.Name, GPUModel: t.GPUModel, Count: off.Count, Zone: off.Zone,
					Start: sg.Start, End: sg.End, State: core.StateScheduled, Fee: sg.Fee, CreatedAt: now, PlanID: p.ID,
				}
				if err := pp.place(b, t, now); err != nil {
					s.index.Forget(p.ID)
					return fmt.Errorf("segment %d of the plan (%s to %s): %w", i+1,
						sg.Start.Format(time.RFC3339), sg.End.Format(time.RFC3339), err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return core.Plan{}, err
	}
	// 4. Commit the plan, its blocks, charges and events at once.
	c := store.Change{
		Insert:      pp.blocks,
		InsertPlans: []core.Plan{p},
		Offerings:   []string{off.ID},
		Idempotency: []store.IdempotencyRecord{{
			Team: req.Team, ClientToken: req.ClientToken, RequestHash: hash, Subject: p.ID, CreatedAt: now,
		}},
		Budgets: guards(guard),
	}
	segmentIDs := make([]any, 0, len(pp.blocks))
	for i, b := range pp.blocks {
		segmentIDs = append(segmentIDs, b.ID)
		c.Journals = append(c.Journals, purchaseJournal(core.JournalPurchase, now, b, b.Fee, off.Segments[i].OnDemandFee))
		c.Events = append(c.Events,
			s.event(now, core.EventBlockPurchased, b, map[string]any{"offeringId": off.ID, "planId": p.ID,
				"upfrontFee": b.Fee.String(), "currency": b.Fee.Currency}),
			s.event(now, core.EventBlockScheduled, b, map[string]any{"from": string(core.StatePaymentPending), "to": string(core.StateScheduled)}))
	}
	c.Events = append(c.Events, planEvent(now, core.EventPlanScheduled, p, map[string]any{
		"from": string(core.PlanPending), "to": string(core.PlanScheduled), "offeringId": off.ID,
		"upfrontFee": p.Fee.String(), "currency": p.Fee.Currency, "segments": segmentIDs,
	}))
	s.resaleCredits(&c, pp.blocks, releases, now)
	s.addMoves(&c, pp.moves, now)
	s.addReserves(&c)
	err = s.commitAudited(ctx, c, now, p.ID)
	s.settle(p.ID, c, err)
	if err != nil {
		return core.Plan{}, fmt.Errorf("storing plan %s: %w", p.ID, err)
	}
	p.Segments = c.Insert // with their versions
	return p, nil
}

// planPlacement places a plan's segments one after another on the index,
// assumed under one decision, so that each sees the ones before it and
// the tentative blocks they moved; forgetting the decision puts the index
// back as it was.
type planPlacement struct {
	ix     *core.Index
	key    string       // the decision the placements are assumed under
	blocks []core.Block // the segments, placed
	moves  []core.Block // other blocks re-placed: the last placement of each
}

func (pp *planPlacement) place(b core.Block, t core.InstanceType, now time.Time) error {
	plan, err := pp.ix.Place(core.PlaceRequest{Type: t, Count: b.Count, Zone: b.Zone, Start: b.Start, End: b.End}, now)
	if err != nil {
		return err
	}
	for _, m := range plan.Moves {
		pp.move(m)
	}
	b.Placements = plan.Placements
	pp.blocks = append(pp.blocks, b)
	return pp.ix.AssumeAs(pp.key, append(plan.Moves, b)...)
}

// move records a re-placed block: an earlier segment of the plan (still
// tentative) is stored where it now is; another block is updated once,
// from the version it had, where it was placed last.
func (pp *planPlacement) move(m core.Block) {
	for i := range pp.blocks {
		if pp.blocks[i].ID == m.ID {
			pp.blocks[i].Placements = m.Placements
			return
		}
	}
	for i := range pp.moves {
		if pp.moves[i].ID == m.ID {
			pp.moves[i] = m
			return
		}
	}
	pp.moves = append(pp.moves, m)
}

// segmentName names a plan's segment block after the plan.
func segmentName(plan string, i, n int) string {
	if plan == "" {
		return fmt.Sprintf("segment %d of %d", i+1, n)
	}
	return fmt.Sprintf("%s (segment %d of %d)", plan, i+1, n)
}

// planPurchaseHash identifies the parameters of a plan purchase for
// idempotency; it differs from every block purchase's, so a token used for
// one kind is refused for the other.
func planPurchaseHash(req contract.PlanPurchaseRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "plan\n%q\n%q\n", req.OfferingID, req.Name)
	return hex.EncodeToString(h.Sum(nil))
}

func planEvent(at time.Time, typ string, p core.Plan, data map[string]any) core.Event {
	return core.Event{ID: newID("evt"), Time: at, Type: typ, Subject: p.ID, Team: p.Team, Data: data}
}

// ListPlans returns a team's plans (every team's for "").
func (s *Service) ListPlans(ctx context.Context, team string) ([]contract.PlanView, error) {
	plans, err := s.store.ListPlans(ctx, team)
	if err != nil {
		return nil, fmt.Errorf("listing plans: %w", err)
	}
	out := make([]contract.PlanView, 0, len(plans))
	for _, p := range plans {
		out = append(out, s.planView(ctx, p))
	}
	return out, nil
}

// GetPlan returns one of a team's plans; another team's is not found.
func (s *Service) GetPlan(ctx context.Context, team, id string) (contract.PlanView, error) {
	p, err := s.teamPlan(ctx, team, id)
	if err != nil {
		return contract.PlanView{}, err
	}
	return s.planView(ctx, p), nil
}

// planView derives a plan's state and capacity now. Callers do not hold mu.
func (s *Service) planView(ctx context.Context, p core.Plan) contract.PlanView {
	core.SortSegments(p.Segments)
	v := contract.PlanView{Plan: p, State: core.PlanStateOf(p.Segments)}
	gpus := 0
	if len(p.Segments) > 0 {
		if t, ok := s.fleet.Type(p.Segments[0].InstanceType); ok {
			gpus = t.GPUsPerInstance
		}
	}
	s.mu.RLock()
	v.Capacity = core.PlanCapacityOf(p.Segments, gpus, func(node string) bool {
		n, ok := s.index.Node(node)
		return ok && n.Health == core.Unhealthy
	})
	s.mu.RUnlock()
	v.Capacity.InUse = s.planInUse(ctx, p)
	return v
}

// planInUse is the instances of the plan that its running jobs use.
func (s *Service) planInUse(ctx context.Context, p core.Plan) int {
	jobs, err := s.store.ListJobs(ctx, p.Team, true)
	if err != nil {
		s.log.Error("listing the jobs of a plan", "plan", p.ID, "err", err)
		return 0
	}
	n := 0
	for _, j := range jobs {
		if j.PlanID == p.ID && j.State == core.JobRunning {
			n += j.InstanceCount
		}
	}
	return n
}

// addPlanEvents adds to a reconciler's change the transitions of the
// plans whose segments take lifecycle steps in it (plan.active between
// and during segments, plan.scheduled, plan.expired), in time order with
// the block events. A plan's segments are read from the store as they
// were before the change: callers do not hold mu (or read the plans
// before with plansOf, and add their transitions under it with
// addPlanTransitions).
func (s *Service) addPlanEvents(ctx context.Context, c *store.Change, steps []transition) error {
	var ids []string
	for _, st := range steps {
		if _, ok := core.StateAfter(st.Event); ok && st.block.PlanID != "" {
			ids = append(ids, st.block.PlanID)
		}
	}
	plans, err := s.plansOf(ctx, ids...)
	if err != nil {
		return err
	}
	addPlanTransitions(c, steps, plans)
	return nil
}

// plansOf reads the plans with the given ids, skipping "" and repeats.
func (s *Service) plansOf(ctx context.Context, ids ...string) (map[string]core.Plan, error) {
	var plans map[string]core.Plan
	for _, id := range ids {
		if _, seen := plans[id]; seen || id == "" {
			continue
		}
		p, err := s.store.Plan(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("loading plan %s to record its transitions: %w", id, err)
		}
		if plans == nil {
			plans = map[string]core.Plan{}
		}
		plans[id] = p
	}
	return plans, nil
}

// addPlanTransitions is addPlanEvents with the plans read before (by
// id): a plan missing from them records no transitions.
func addPlanTransitions(c *store.Change, steps []transition, plans map[string]core.Plan) {
	changes := map[string][]core.SegmentChange{}
	var ids []string
	for _, st := range steps {
		to, ok := core.StateAfter(st.Event)
		if st.block.PlanID == "" || !ok {
			continue
		}
		if _, seen := changes[st.block.PlanID]; !seen {
			ids = append(ids, st.block.PlanID)
		}
		changes[st.block.PlanID] = append(changes[st.block.PlanID], core.SegmentChange{BlockID: st.block.ID, State: to, At: st.At})
	}
	if len(ids) == 0 {
		return
	}
	for _, id := range ids {
		p, ok := plans[id]
		if !ok {
			continue
		}
		for _, tr := range core.PlanTransitions(p.Segments, changes[id]) {
			c.Events = append(c.Events, planEvent(tr.At, tr.To.EventOf(), p, map[string]any{
				"from": string(tr.From), "to": string(tr.To), "segment": tr.BlockID,
			}))
		}
	}
	sort.SliceStable(c.Events, func(i, j int) bool { return c.Events[i].Time.Before(c.Events[j].Time) })
}
