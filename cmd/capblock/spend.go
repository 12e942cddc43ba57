package main

import (
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
the same hours cost on demand, SAVINGS = ON-DEMAND - SPENT.`,
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
			teams := teamNames(cmd.Context(), c)
			t := a.newTable("TEAM", "TYPE", "MONTH", "GROSS", "REFUNDS", "CREDITS", "NET", "SPENT", "ON-DEMAND", "SAVINGS", "SAVINGS %",
				"GPU-H RESERVED", "USED", "LENT", "IDLE")
			hours := func(g client.GPUHours) []string {
				return []string{gpuHours(g.Reserved), gpuHours(g.Used), gpuHours(g.Lent), gpuHours(g.Idle)}
			}
			cash := func(c client.Cash) []string {
				return []string{c.Gross.String(), c.Refunds.String(), c.Credits.String(), c.Net.String()}
			}
			for _, r := range s.Rows {
				cells := append([]string{nameOf(teams, r.Team), r.InstanceType, r.Month}, cash(r.Cash)...)
				cells = append(cells, r.Spent.String(), r.OnDemand.String(), r.Savings.String(), percent(r.Savings, r.OnDemand))
				t.row(append(cells, hours(r.GPUHours)...)...)
			}
			cells := append([]string{"total", "", ""}, cash(s.Total.Cash)...)
			cells = append(cells, s.Total.Spent.String(), s.Total.OnDemand.String(), s.Total.Savings.String(), percent(s.Total.Savings, s.Total.OnDemand))
			t.row(append(cells, hours(s.Total.GPUHours)...)...)
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.Team, "team", "", "only this team (default: every team you may see)")
	f.StringVar(&q.From, "from", "", "first month, e.g. 2026-11")
	f.StringVar(&q.To, "to", "", "last month, e.g. 2026-12")
	return cmd
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
