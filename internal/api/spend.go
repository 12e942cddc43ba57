package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerSpend declares the spend report.
func (s *server) registerSpend(api huma.API) {
	huma.Register(api, s.operation("getSpend", http.MethodGet, "/v1/spend", "teams",
		"Net spend by team, instance type and month, with the on-demand cost of the same hours and the savings"), s.spend)
}

type spendInput struct {
	Team string `query:"team" doc:"One team (its id); every team in scope when empty."`
	From string `query:"from" pattern:"^[0-9]{4}-(0[1-9]|1[0-2])$" doc:"First month, YYYY-MM."`
	To   string `query:"to" pattern:"^[0-9]{4}-(0[1-9]|1[0-2])$" doc:"Last month, YYYY-MM (included)."`
}

type spendRowJSON struct {
	Team         string `json:"team,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	Month        string `json:"month,omitempty" example:"2026-12"`
	cashJSON
	Spent    moneyJSON    `json:"spent" doc:"What the hours the team held cost: hours handed on take their cost with them to the team that received them."`
	OnDemand moneyJSON    `json:"onDemand" doc:"What the same instance-hours cost on demand."`
	Savings  moneyJSON    `json:"savings" doc:"onDemand - spent."`
	GPUHours gpuHoursJSON `json:"gpuHours" doc:"What became of the GPU-hours reserved in the month."`
}

type spendJSON struct {
	Rows  []spendRowJSON `json:"rows"`
	Total spendRowJSON   `json:"total"`
}

func toSpendRow(r contract.SpendRow) spendRowJSON {
	savings := core.Money{Minor: r.OnDemand.Minor - r.Spent.Minor, Currency: r.Spent.Currency}
	return spendRowJSON{Team: r.Team, InstanceType: r.InstanceType, Month: r.Month, cashJSON: toCash(r.Cash),
		Spent: toMoney(r.Spent), OnDemand: toMoney(r.OnDemand), Savings: toMoney(savings), GPUHours: toGPUHours(r.GPUHours)}
}

func (s *server) spend(ctx context.Context, in *spendInput) (*out[spendJSON], error) {
	var from, to time.Time
	if in.From != "" {
		from, _ = time.Parse("2006-01", in.From) // the pattern guarantees the form
	}
	if in.To != "" {
		t, _ := time.Parse("2006-01", in.To)
		to = t.AddDate(0, 1, 0)
	}
	if !from.IsZero() && !to.IsZero() && !to.After(from) {
		return nil, invalid("query.to: %s is before from %s", in.To, in.From)
	}
	rep, err := s.svc.Spend(ctx, scopeOf(ctx), in.Team, from, to)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := spendJSON{Rows: make([]spendRowJSON, 0, len(rep.Rows)), Total: toSpendRow(rep.Total)}
	for _, r := range rep.Rows {
		resp.Rows = append(resp.Rows, toSpendRow(r))
	}
	return reply(resp)
}
