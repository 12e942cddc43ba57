package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// PutQuota sets a team's quota, for all instance types or for one. Zero
// fields fall back to the operator's defaults.
func (s *Service) PutQuota(ctx context.Context, q core.Quota) (core.Quota, error) {
	if _, err := s.Team(ctx, "", q.Team); err != nil {
		return core.Quota{}, err
	}
	if q.InstanceType != "" {
		if _, ok := s.fleet.Type(q.InstanceType); !ok {
			return core.Quota{}, core.Invalidf("unknown instance type %q", q.InstanceType)
		}
	}
	if q.MaxInstancesPerBlock < 0 || q.MaxInstancesHeld < 0 || q.MaxDuration < 0 || q.MaxLead < 0 {
		return core.Quota{}, core.Invalidf("quota limits cannot be negative (0 means the operator's default)")
	}
	if q.MaxDuration%time.Hour != 0 {
		return core.Quota{}, core.Invalidf("maxDurationHours must be whole hours")
	}
	err := s.store.PutQuota(ctx, q)
	s.accounts.forget() // the other replicas hear of it from the store
	if err != nil {
		return core.Quota{}, fmt.Errorf("storing the quota of team %s: %w", q.Team, err)
	}
	return q, nil
}

// Quotas returns the quotas stored for a team in scope.
func (s *Service) Quotas(ctx context.Context, scope, team string) ([]core.Quota, error) {
	if _, err := s.Team(ctx, scope, team); err != nil {
		return nil, err
	}
	qs, err := s.store.Quotas(ctx, team)
	if err != nil {
		return nil, fmt.Errorf("loading the quotas of team %s: %w", team, err)
	}
	return qs, nil
}

// effectiveQuota is the quota that applies to a team buying a type: the
// per-type row, else the team's row, else the defaults, field by field.
// Its InstanceType is set when the limit on instances held comes from a
// per-type row, and so counts that type only.
func (s *Service) effectiveQuota(ctx context.Context, team, instanceType string) (core.Quota, error) {
	q := core.DefaultQuota(s.fleet.Limits)
	qs, err := cachedRead(&s.accounts, "quotas:"+team, false, func() ([]core.Quota, error) {
		return s.store.Quotas(ctx, team)
	})
	if err != nil {
		return q, fmt.Errorf("loading the quotas of team %s: %w", team, err)
	}
	apply := func(r core.Quota) {
		if r.MaxInstancesPerBlock > 0 {
			q.MaxInstancesPerBlock = r.MaxInstancesPerBlock
		}
		if r.MaxInstancesHeld > 0 {
			q.MaxInstancesHeld = r.MaxInstancesHeld
		}
		if r.MaxDuration > 0 {
			q.MaxDuration = r.MaxDuration
		}
		if r.MaxLead > 0 {
			q.MaxLead = r.MaxLead
		}
	}
	q.Team = team
	for _, r := range qs { // the all-types row comes first
		if r.InstanceType == "" || r.InstanceType == instanceType {
			apply(r)
		}
		if r.InstanceType == instanceType && r.MaxInstancesHeld > 0 {
			q.InstanceType = instanceType
		}
	}
	return q, nil
}

// PutBudget sets a team's budget.
func (s *Service) PutBudget(ctx context.Context, b core.Budget) (core.Budget, error) {
	if _, err := s.Team(ctx, "", b.Team); err != nil {
		return core.Budget{}, err
	}
	switch b.Period {
	case core.BudgetMonth, core.BudgetTotal, core.BudgetNone:
	default:
		return core.Budget{}, core.Invalidf("budget period %q: want month, total or none", b.Period)
	}
	if b.Amount.Minor < 0 {
		return core.Budget{}, core.Invalidf("budget amount %s is negative", b.Amount)
	}
	if b.Amount.Currency != s.fleet.Currency {
		return core.Budget{}, core.Invalidf("budget currency %q: this fleet prices in %s", b.Amount.Currency, s.fleet.Currency)
	}
	err := s.store.PutBudget(ctx, b)
	s.accounts.forget() // the other replicas hear of it from the store
	if err != nil {
		return core.Budget{}, fmt.Errorf("storing the budget of team %s: %w", b.Team, err)
	}
	return b, nil
}

// budgetGuard is the check a commit charging the team must pass, or nil
// when the team has no budget.
func (s *Service) budgetGuard(ctx context.Context, team string, now time.Time) (*core.BudgetGuard, error) {
	guardAt, err := s.budgetGuardAt(ctx, team)
	if err != nil {
		return nil, err
	}
	return guardAt(now), nil
}

// budgetGuardAt reads the team's budget and returns its budgetGuard at
// any now, for a decision that reads the store before it takes the lock
// and learns its now only then.
func (s *Service) budgetGuardAt(ctx context.Context, team string) (func(now time.Time) *core.BudgetGuard, error) {
	b, err := cachedRead(&s.accounts, "budget:"+team, true, func() (core.Budget, error) {
		return s.store.Budget(ctx, team)
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && b.Period == core.BudgetNone) {
		return func(time.Time) *core.BudgetGuard { return nil }, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading the budget of team %s: %w", team, err)
	}
	return func(now time.Time) *core.BudgetGuard {
		return &core.BudgetGuard{Team: team, Limit: b.Amount, Since: b.PeriodStart(now), Credits: s.fleet.Limits.BudgetCountsCredits}
	}, nil
}

// Ledger returns a team's ledger.
func (s *Service) Ledger(ctx context.Context, scope, team string) (contract.LedgerView, error) {
	if _, err := s.Team(ctx, scope, team); err != nil {
		return contract.LedgerView{}, err
	}
	entries, err := s.store.Ledger(ctx, team)
	if err != nil {
		return contract.LedgerView{}, fmt.Errorf("loading the ledger of team %s: %w", team, err)
	}
	v := contract.LedgerView{Entries: entries, Spent: core.Money{Currency: s.fleet.Currency}, Cash: contract.ZeroCash(s.fleet.Currency)}
	since := time.Time{}
	if b, err := s.store.Budget(ctx, team); err == nil {
		v.Budget = &b
		since = b.PeriodStart(s.clock.Now())
	} else if !errors.Is(err, store.ErrNotFound) {
		return contract.LedgerView{}, fmt.Errorf("loading the budget of team %s: %w", team, err)
	}
	for _, e := range entries {
		v.Cash.Add(e)
		if !e.Time.Before(since) {
			v.Spent.Minor += s.spending(e)
		}
	}
	return v, nil
}

// spending is a ledger line's part of what the team's budget counts:
// charges positive, refunds negative, credits negative only under the
// fleet's budgetCountsCredits (core.Posting.Spending, as the store's
// budget guard sums it).
func (s *Service) spending(e core.LedgerEntry) int64 {
	switch {
	case e.Kind == core.LedgerCharge:
		return e.Amount.Minor
	case e.Kind == core.LedgerRefund, e.Kind == core.LedgerCredit && s.fleet.Limits.BudgetCountsCredits:
		return -e.Amount.Minor
	}
	return 0
}

// guards is the budget guards of a change: none when the team has no
// budget.
func guards(g *core.BudgetGuard) []core.BudgetGuard {
	if g == nil {
		return nil
	}
	return []core.BudgetGuard{*g}
}
