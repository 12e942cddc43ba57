package main

import (
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
	"capblock/internal/fleet"
)

// monthLayout is how --from and --to name a month.
const monthLayout = "2006-01"

func (a *app) spendCmd() *cobra.Command {
	var q client.SpendQuery
	cmd := &cobra.Command{
		Use:   "spend [--team TEAM_ID] [--from YYYY-MM] [--to YYYY-MM]",
		Short: "Show spend per team, instance type and month: charges, refunds, credits and net, the cost of the hours held against on-demand prices, and the GPU-hours reserved, used, lent and idle",
		Long: `Show spend per team, instance type and month.

GROSS is what the team was charged, REFUNDS what came back of it, CREDITS
its income from others (a transfer's price, resale and lending credits),
NET = GROSS - REFUNDS - CREDITS. SPENT is what the hours the team held
cost: hours handed on to another team take their cost with them, so the
receiver's SPENT shows them and the holder's does not. ON-DEMAND is what
the same hours cost on demand, SAVINGS = ON-DEMAND - SPENT. The table
fits 120 columns with SAVINGS %; -o wide adds SPENT, ON-DEMAND, SAVINGS
and the GPU-hours LENT.`,
		Example: `  capblock spend --from 2026-11 --to 2026-12
  capblock spend --team team-…`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := parseMonth("--from", q.From)
			if err != nil {
				return err
			}
			to, err := parseMonth("--to", q.To)
			if err != nil {
				return err
			}
			if !from.IsZero() && !to.IsZero() && to.Before(from) {
				return usagef("--to %s is before --from %s", q.To, q.From)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if q.Team, err = teamFlag(cmd.Context(), c, q.Team); err != nil {
				return err
			}
			s, err := c.Spend(cmd.Context(), q)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			if len(s.Rows) == 0 {
				a.note("no spend in that period")
				return nil
			}
			return a.printSpend(s, teamNames(cmd.Context(), c))
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Team, "team", "", "only this team (default: every team you may see)")
	f.StringVar(&q.From, "from", "", "first month, e.g. 2026-11")
	f.StringVar(&q.To, "to", "", "last month, e.g. 2026-12")
	return cmd
}

// printSpend writes the spend report as a table, a row per team, type and
// month and one of totals; teams by their names (teams, by id). It fits
// 120 columns with a long team name cut: the money columns but NET that
// compare with on-demand, and the hours lent, are -o wide's.
func (a *app) printSpend(s client.Spend, teams map[string]string) error {
	wide := a.wideOutput()
	headers := []string{"TEAM", "TYPE", "MONTH", "GROSS", "REFUNDS", "CREDITS", "NET", "SAVINGS %", "GPU-H RESERVED", "USED", "IDLE"}
	if wide {
		headers = slices.Insert(headers, 7, "SPENT", "ON-DEMAND", "SAVINGS")
		headers = slices.Insert(headers, len(headers)-1, "LENT")
	}
	t := a.newTable(headers...).clipToFit("TEAM")
	row := func(team, typ, month string, r client.SpendRow) {
		cells := []string{team, typ, month, r.Gross.String(), r.Refunds.String(), r.Credits.String(), r.Net.String()}
		if wide {
			cells = append(cells, r.Spent.String(), r.OnDemand.String(), r.Savings.String())
		}
		cells = append(cells, percent(r.Savings, r.OnDemand), gpuHours(r.GPUHours.Reserved), gpuHours(r.GPUHours.Used))
		if wide {
			cells = append(cells, gpuHours(r.GPUHours.Lent))
		}
		t.row(append(cells, gpuHours(r.GPUHours.Idle))...)
	}
	for _, r := range s.Rows {
		row(nameOf(teams, r.Team), r.InstanceType, r.Month, r)
	}
	tot := s.Total
	row("total", "", "", client.SpendRow{Cash: tot.Cash, Spent: tot.Spent, OnDemand: tot.OnDemand, Savings: tot.Savings, GPUHours: tot.GPUHours})
	return t.flush()
}

// parseMonth checks a YYYY-MM flag; empty stays the zero time.
func parseMonth(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(monthLayout, s)
	if err != nil {
		return time.Time{}, usagef("%s %q is not a month; write it like 2026-12", flag, s)
	}
	return t, nil
}

// percent is part of whole in whole percent, rounded half away from zero;
// "-" when it cannot be told.
func percent(part, whole client.Money) string {
	p, err1 := fleet.ParseMoney(part.Amount, part.Currency)
	w, err2 := fleet.ParseMoney(whole.Amount, whole.Currency)
	if err1 != nil || err2 != nil || w.Minor <= 0 || p.Currency != w.Currency {
		return "-"
	}
	n := p.Minor * 100
	if n < 0 {
		return "-" + strconv.FormatInt((-n+w.Minor/2)/w.Minor, 10) + "%"
	}
	return strconv.FormatInt((n+w.Minor/2)/w.Minor, 10) + "%"
}

func (a *app) auditCmd() *cobra.Command {
	var after string
	cmd := &cobra.Command{
		Use:   "audit [--after N]",
		Short: "Print the audit log of mutating requests (admin)",
		Long: `Print who did what: each mutating request with its user, team, route,
subject and outcome (-o wide: and the token id), oldest first, and the
cursor to pass as --after next time.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			page, err := c.Audit(cmd.Context(), after)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(page)
			}
			if len(page.Records) == 0 {
				if after == "" {
					a.note("no audit records yet")
				} else {
					a.note("no audit records after %s", after)
				}
				return nil
			}
			teams, users := teamNames(cmd.Context(), c), userNames(cmd.Context(), c)
			cols := []string{"SEQ", "TIME (UTC)", "USER", "TEAM", "REQUEST", "SUBJECT", "STATUS", "OUTCOME"}
			if a.wideOutput() {
				cols = append(cols, "TOKEN")
			}
			t := a.newTable(cols...).clipToFit("USER", "TEAM", "OUTCOME")
			for _, r := range page.Records {
				subject := r.Subject
				if subject == "" {
					subject = "-"
				}
				row := []string{strconv.FormatInt(r.Seq, 10), fmtTime(r.Time), nameOf(users, r.User), nameOf(teams, r.Team), r.Method + " " + r.Route,
					subject, strconv.Itoa(r.Status), r.Outcome}
				if a.wideOutput() {
					row = append(row, r.TokenID)
				}
				t.row(row...)
			}
			if err := t.flush(); err != nil {
				return err
			}
			a.note("next: capblock audit --after %s", page.Next)
			return nil
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "print only records after this cursor")
	return cmd
}
