package main

import (
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
	"capblock/internal/fleet"
	"capblock/internal/humantime"
)

// budgetPeriods are the periods `teams budget --period` accepts (API.md).
var budgetPeriods = []string{"month", "total", "none"}

func (a *app) teamsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "teams",
		Short: "Teams, their quotas, budgets and ledgers",
		RunE:  groupRunE,
	}
	cmd.AddCommand(
		a.teamsListCmd(),
		a.teamsCreateCmd(),
		a.teamsShowCmd(),
		a.teamsQuotaCmd(),
		a.teamsBudgetCmd(),
		a.teamsLedgerCmd(),
		a.teamsDisableCmd(true),
		a.teamsDisableCmd(false),
	)
	return cmd
}

func (a *app) teamsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List teams: every team for an admin, one's own otherwise",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			teams, err := c.Teams(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"teams": teams})
			}
			return a.printTeams(teams)
		},
	}
}

func (a *app) printTeams(teams []client.Team) error {
	t := a.newTable("ID", "NAME", "CREATED (UTC)", "STATE").clipToFit("NAME")
	for _, tm := range teams {
		t.row(tm.ID, tm.Name, fmtTime(tm.CreatedAt), enabledState(tm.DisabledAt))
	}
	return t.flush()
}

func (a *app) teamsCreateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "create NAME",
		Short: "Create a team (admin)",
		Args:  exactlyOne("team name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			team, err := c.CreateTeam(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(team)
			}
			if err := a.printTeams([]client.Team{team}); err != nil {
				return err
			}
			a.note("add people with: capblock users create NAME --team %s --role member", team.ID)
			return nil
		},
	}
}

func (a *app) teamsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show TEAM_ID",
		Short: "Show a team and its quotas",
		Args:  exactlyOne("team id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			team, err := c.Team(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			quotas, err := c.Quotas(cmd.Context(), team.ID)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(struct {
					client.Team
					Quotas []client.Quota `json:"quotas"`
				}{team, quotas})
			}
			t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
			t.row("id:", team.ID)
			t.row("name:", team.Name)
			t.row("created:", fmtZoned(team.CreatedAt))
			if len(quotas) == 0 {
				t.row("quotas:", "the operator's defaults")
			}
			if err := t.flush(); err != nil || len(quotas) == 0 {
				return err
			}
			fmt.Fprintln(a.stdout)
			return a.printQuotas(quotas)
		},
	}
}

// printQuotas writes quota rows; a zero limit is the operator's default.
func (a *app) printQuotas(quotas []client.Quota) error {
	t := a.newTable("TYPE", "MAX PER BLOCK", "MAX HELD", "MAX DURATION", "MAX LEAD")
	limit := func(n int, unit time.Duration) string {
		switch {
		case n == 0:
			return "default"
		case unit == 0:
			return strconv.Itoa(n)
		}
		return humantime.FormatDuration(time.Duration(n) * unit)
	}
	for _, q := range quotas {
		typ := q.InstanceType
		if typ == "" {
			typ = "all types"
		}
		t.row(typ, limit(q.MaxInstancesPerBlock, 0), limit(q.MaxInstancesHeld, 0),
			limit(q.MaxDurationHours, time.Hour), limit(q.MaxLeadDays, humantime.Day))
	}
	return t.flush()
}

func (a *app) teamsQuotaCmd() *cobra.Command {
	var (
		instanceType         string
		maxPerBlock, maxHeld int
		maxDuration, maxLead string
	)
	cmd := &cobra.Command{
		Use:   "quota TEAM_ID [--type T] [--max-per-block N] [--max-held N] [--max-duration D] [--max-lead D]",
		Short: "Show a team's quotas, or change limits of one row (admin)",
		Long: `Without limit flags, list the team's quotas. With some, change those limits
of the team's row for --type (every type when not given) and keep the row's
other limits. A limit of 0 means the operator's default.`,
		Example: `  capblock teams quota team-… --max-held 16 --max-duration 72h --max-lead 4w
  capblock teams quota team-… --type h100.8x --max-per-block 4`,
		Args: exactlyOne("team id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			changing := f.Changed("max-per-block") || f.Changed("max-held") || f.Changed("max-duration") || f.Changed("max-lead")
			if f.Changed("type") && !changing {
				return usagef("--type picks the row to change: give a limit too (--max-per-block, --max-held, --max-duration or --max-lead)")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			quotas, err := c.Quotas(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !changing {
				if a.jsonOutput() {
					return a.printJSON(map[string]any{"quotas": quotas})
				}
				if len(quotas) == 0 {
					a.note("team %s has the operator's default quotas", args[0])
					return nil
				}
				return a.printQuotas(quotas)
			}
			// Start from the stored row so that unnamed limits stay as they are.
			q := client.Quota{InstanceType: instanceType}
			if i := slices.IndexFunc(quotas, func(r client.Quota) bool { return r.InstanceType == instanceType }); i >= 0 {
				q = quotas[i]
			}
			if f.Changed("max-per-block") {
				q.MaxInstancesPerBlock = maxPerBlock
			}
			if f.Changed("max-held") {
				q.MaxInstancesHeld = maxHeld
			}
			if f.Changed("max-duration") {
				if q.MaxDurationHours, err = parseLimit("--max-duration", maxDuration, time.Hour, "hours"); err != nil {
					return err
				}
			}
			if f.Changed("max-lead") {
				if q.MaxLeadDays, err = parseLimit("--max-lead", maxLead, humantime.Day, "days"); err != nil {
					return err
				}
			}
			q, err = c.PutQuota(cmd.Context(), args[0], q)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(q)
			}
			return a.printQuotas([]client.Quota{q})
		},
	}
	f := cmd.Flags()
	f.StringVar(&instanceType, "type", "", "the instance type whose row to change (default: the row for every type)")
	f.IntVar(&maxPerBlock, "max-per-block", 0, "most instances in one block (0: the default)")
	f.IntVar(&maxHeld, "max-held", 0, "most instances held at once (0: the default)")
	f.StringVar(&maxDuration, "max-duration", "", "longest block, in whole hours, e.g. 72h or 1w (0: the default)")
	f.StringVar(&maxLead, "max-lead", "", "how far ahead a block may start, in whole days, e.g. 4w (0: the default)")
	return cmd
}

// parseLimit parses a duration limit into whole units; "0" is the default.
func parseLimit(flag, s string, unit time.Duration, unitName string) (int, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := humantime.ParseDuration(s)
	if err != nil {
		examples := map[string]string{"hours": "72h or 1w", "days": "28d or 4w"}[unitName]
		return 0, usagef("%s %q is not a duration; write it in whole %s, like %s, or 0 for the default", flag, s, unitName, examples)
	}
	if d < 0 || d%unit != 0 {
		return 0, usagef("%s %s is not a whole number of %s", flag, s, unitName)
	}
	return int(d / unit), nil
}

func (a *app) teamsBudgetCmd() *cobra.Command {
	var amount, currency, period string
	cmd := &cobra.Command{
		Use:   "budget TEAM_ID --period month|total|none [--amount A] [--currency C]",
		Short: "Set a team's budget (admin): purchases beyond it are refused",
		Example: `  capblock teams budget team-… --amount 1000.00 --period month
  capblock teams budget team-… --period none`,
		Args: exactlyOne("team id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(budgetPeriods, period) {
				return usagef("--period %q: choose one of %v", period, budgetPeriods)
			}
			switch {
			case amount == "" && period != "none":
				return usagef("give the --amount of the budget, e.g. 1000.00")
			case amount == "":
				amount = "0.00"
			}
			if _, err := fleet.ParseMoney(amount, currency); err != nil {
				return usageError(fmt.Errorf("--amount: %w", err))
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := c.PutBudget(cmd.Context(), args[0], client.Budget{Amount: client.Money{Amount: amount, Currency: currency}, Period: period})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(b)
			}
			a.printLine("budget of team %s: %s", args[0], fmtBudget(&b))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&amount, "amount", "", "the budget, e.g. 1000.00")
	f.StringVar(&currency, "currency", "USD", "the budget's currency")
	f.StringVar(&period, "period", "", "month (resets each calendar month), total, or none (no budget)")
	_ = cmd.MarkFlagRequired("period")
	return cmd
}

// fmtBudget writes "1000.00 USD per month", or "none".
func fmtBudget(b *client.Budget) string {
	switch {
	case b == nil || b.Period == "none":
		return "none"
	case b.Period == "month":
		return b.Amount.String() + " per month"
	case b.Period == "total":
		return b.Amount.String() + " in total"
	}
	return b.Amount.String() + " (" + b.Period + ")"
}

func (a *app) teamsLedgerCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ledger TEAM_ID",
		Short: "List a team's charges, refunds and credits, in journal order, with its totals, spend and budget",
		Long: `List a team's ledger in journal order: each charge (the team paid), refund
(some of it came back) and credit (income from others: a transfer's price,
a resale, lending), then the totals. net = gross - refunds - credits;
spent is what the team's budget counts in its current period (credits
count only where the fleet's budgetCountsCredits says so).`,
		Args: exactlyOne("team id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.Ledger(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(l)
			}
			if len(l.Entries) > 0 {
				t := a.newTable("SEQ", "TIME (UTC)", "KIND", "AMOUNT", "SUBJECT", "JOURNAL")
				for _, e := range l.Entries {
					t.row(strconv.FormatInt(e.Seq, 10), fmtTime(e.Time), e.Kind, e.Amount.String(), e.Subject, e.JournalID)
				}
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout)
			}
			t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
			t.row("gross:", l.Gross.String())
			t.row("refunds:", l.Refunds.String())
			t.row("credits:", l.Credits.String())
			t.row("net:", l.Net.String())
			t.row("spent:", l.Spent.String()+" (what the budget counts in its period)")
			t.row("budget:", fmtBudget(l.Budget))
			return t.flush()
		},
	}
}
