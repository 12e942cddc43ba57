package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// CancelPlan cancels what is left of one of a team's plans: every segment
// still to come or active, each under the fleet's refund policy (as
// CancelBlock would), in one commit with one plan.cancelled event. A plan
// with nothing left to cancel is refused with core.ErrInvalidState;
// another team's plan is not found.
func (s *Service) CancelPlan(ctx context.Context, team, id string) (contract.PlanView, error) {
	for attempt := 1; ; attempt++ {
		p, err := s.teamPlan(ctx, team, id)
		if err != nil {
			return contract.PlanView{}, err
		}
		core.SortSegments(p.Segments)
		var c store.Change
		bases, err := s.cancelBases(ctx, p.Segments)
		if err == nil {
			err = s.withLock(func() (err error) {
				if c, err = s.planCancellation(p, s.clock.Now(), bases); err == nil {
					s.addReserves(&c)
					err = s.assumeChange(c)
				}
				return err
			})
		}
		switch {
		case err == nil:
			err = s.store.Commit(ctx, c)
			s.settle(changeKey(c), c, err)
			if err != nil && !store.IsConflict(err) {
				return contract.PlanView{}, fmt.Errorf("cancelling plan %s: %w", id, err)
			}
		case !store.IsConflict(err):
			return contract.PlanView{}, err // refused
		}
		// err is nil or a conflict (another decision on a segment in
		// flight, or a segment moved in the store), which decides again on
		// a fresh read, as mutate does.
		switch {
		case err == nil:
			s.kickOutbox()
			return s.GetPlan(ctx, team, id)
		case attempt == maxCommitAttempts:
			s.log.Warn("a plan's cancellation kept conflicting with stored state", "plan", id, "attempts", attempt, "err", err)
			return contract.PlanView{}, fmt.Errorf("%w: plan %s changed concurrently %d times in a row; try again", core.ErrConflict, id, attempt)
		}
	}
}

// cancelBases reads what cancelling each segment may refund
// (cancelBasis), by segment, before the lock.
func (s *Service) cancelBases(ctx context.Context, segments []core.Block) (map[string]core.RefundBasis, error) {
	bases := make(map[string]core.RefundBasis, len(segments))
	for _, b := range segments {
		basis, err := s.cancelBasis(ctx, b)
		if err != nil {
			return nil, err
		}
		bases[b.ID] = basis
	}
	return bases, nil
}

// planCancellation is the change that cancels p's segments that are still
// to come or active at now, each refunding at most its basis in bases
// (cancelBases). Callers hold mu.
func (s *Service) planCancellation(p core.Plan, now time.Time, bases map[string]core.RefundBasis) (store.Change, error) {
	var c store.Change
	after := slices.Clone(p.Segments)
	for i, b := range p.Segments {
		switch b.State {
		case core.StatePaymentPending, core.StateScheduled, core.StateActive:
		default:
			continue
		}
		step, err := s.addCancel(&c, b, now, bases[b.ID])
		if err != nil {
			return store.Change{}, err
		}
		after[i] = step.block
	}
	from := core.PlanStateOf(p.Segments)
	if len(c.Update) == 0 {
		return store.Change{}, fmt.Errorf("%w: plan %s is %s: only a plan with a segment still to come or active can be cancelled", core.ErrInvalidState, p.ID, from)
	}
	c.Events = append(c.Events, planEvent(now, core.EventPlanCancelled, p, map[string]any{
		"from": string(from), "to": string(core.PlanStateOf(after)), "segments": len(c.Update),
	}))
	return c, nil
}

// teamPlan loads one of a team's plans ("" for any team); another team's
// is not found.
func (s *Service) teamPlan(ctx context.Context, team, id string) (core.Plan, error) {
	p, err := s.store.Plan(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && team != "" && p.Team != team) {
		return core.Plan{}, fmt.Errorf("%w: plan %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.Plan{}, fmt.Errorf("loading plan %s: %w", id, err)
	}
	return p, nil
}
