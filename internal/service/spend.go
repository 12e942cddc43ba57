package service

import (
	"context"
	"fmt"
	"sort"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Spend sums the ledger by team, instance type and month (UTC) over
// [from, to) months, with what the same instance-hours cost on demand
// and what became of the GPU-hours reserved (see Utilisation). A
// team other than scope's is not found; team "" means every team in scope.
func (s *Service) Spend(ctx context.Context, scope, team string, from, to time.Time) (contract.SpendReport, error) {
	if team == "" {
		team = scope
	} else if _, err := s.Team(ctx, scope, team); err != nil {
		return contract.SpendReport{}, err
	}
	entries, err := s.store.Ledger(ctx, team)
	if err != nil {
		return contract.SpendReport{}, fmt.Errorf("reading the ledger: %w", err)
	}
	type key struct{ team, typ, month string }
	rows := map[key]*contract.SpendRow{}
	zero := core.Money{Currency: s.fleet.Currency}
	rep := contract.SpendReport{Total: contract.SpendRow{Spent: zero, OnDemand: zero}}
	for _, e := range entries {
		if (!from.IsZero() && e.Time.Before(from)) || (!to.IsZero() && !e.Time.Before(to)) {
			continue
		}
		k := key{e.Team, e.InstanceType, e.Time.UTC().Format("2006-01")}
		r := rows[k]
		if r == nil {
			r = &contract.SpendRow{Team: k.team, InstanceType: k.typ, Month: k.month, Spent: zero, OnDemand: zero}
			rows[k] = r
		}
		sign := int64(1)
		if e.Kind == core.LedgerRefund {
			sign = -1
		}
		r.Spent.Minor += sign * e.Amount.Minor
		r.OnDemand.Minor += sign * e.OnDemand.Minor
		rep.Total.Spent.Minor += sign * e.Amount.Minor
		rep.Total.OnDemand.Minor += sign * e.OnDemand.Minor
	}
	// What became of the reserved GPU-hours, in the same rows.
	used, err := s.monthlyUtilisation(ctx, team, from, to)
	if err != nil {
		return contract.SpendReport{}, err
	}
	var all core.Utilisation
	for k, u := range used {
		r := rows[key{k[0], k[1], k[2]}]
		if r == nil {
			r = &contract.SpendRow{Team: k[0], InstanceType: k[1], Month: k[2], Spent: zero, OnDemand: zero}
			rows[key{k[0], k[1], k[2]}] = r
		}
		r.GPUHours = contract.GPUHoursOf(u)
		all = all.Add(u)
	}
	rep.Total.GPUHours = contract.GPUHoursOf(all)
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	sort.Slice(rep.Rows, func(i, j int) bool {
		a, b := rep.Rows[i], rep.Rows[j]
		if a.Month != b.Month {
			return a.Month < b.Month
		}
		if a.Team != b.Team {
			return a.Team < b.Team
		}
		return a.InstanceType < b.InstanceType
	})
	return rep, nil
}
