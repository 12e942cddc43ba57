package service

import (
	"context"
	"fmt"
	"sort"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// Spend sums the journals by team, instance type and month (UTC) over
// [from, to) months: what moved through each team's wallet (gross,
// refunds, credits, net), and what the hours each team held cost and
// would have cost on demand. The cost of hours follows them: a block's
// escrow is reported under the team holding it, so hours handed on are
// reported under the team that received them, and a spot run's charge
// under the team that ran it. With it, what became of the GPU-hours
// reserved (see Utilisation). A team other than scope's is not found;
// team "" means every team in scope.
func (s *Service) Spend(ctx context.Context, scope, team string, from, to time.Time) (contract.SpendReport, error) {
	if team == "" {
		team = scope
	} else if _, err := s.Team(ctx, scope, team); err != nil {
		return contract.SpendReport{}, err
	}
	journals, err := s.store.Journals(ctx, store.JournalFilter{Team: team})
	if err != nil {
		return contract.SpendReport{}, fmt.Errorf("reading the journals: %w", err)
	}
	type key struct{ team, typ, month string }
	rows := map[key]*contract.SpendRow{}
	zero := core.Money{Currency: s.fleet.Currency}
	newRow := func(k key) *contract.SpendRow {
		return &contract.SpendRow{Team: k.team, InstanceType: k.typ, Month: k.month, Spent: zero, OnDemand: zero, Cash: contract.ZeroCash(s.fleet.Currency)}
	}
	rep := contract.SpendReport{Total: *newRow(key{})}
	for _, j := range journals {
		if (!from.IsZero() && j.Time.Before(from)) || (!to.IsZero() && !j.Time.Before(to)) {
			continue
		}
		entries := j.Entries()
		for _, p := range j.Postings {
			if p.Team == "" || (team != "" && p.Team != team) {
				continue
			}
			k := key{p.Team, j.InstanceType, j.Time.UTC().Format("2006-01")}
			r := rows[k]
			if r == nil {
				r = newRow(k)
				rows[k] = r
			}
			if core.IsWallet(p.Account) {
				continue // below, as the team's ledger shows it
			}
			r.Spent.Minor += p.Amount
			r.OnDemand.Minor += p.OnDemand
			rep.Total.Spent.Minor += p.Amount
			rep.Total.OnDemand.Minor += p.OnDemand
		}
		for _, e := range entries {
			if team != "" && e.Team != team {
				continue
			}
			rows[key{e.Team, j.InstanceType, j.Time.UTC().Format("2006-01")}].Cash.Add(e)
			rep.Total.Cash.Add(e)
		}
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
			r = newRow(key{k[0], k[1], k[2]})
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
