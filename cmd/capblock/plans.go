package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// plansCmd is `capblock plans offerings|buy|list|show|cancel`.
func (a *app) plansCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plans",
		Short: "Search, buy and watch training plans: a total duration in one or more blocks",
		Long: `Search, buy and watch training plans: a total duration in one or more blocks.
A command that takes a PLAN takes its id (tp-…) or its name, when no other
plan you can see has that name.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.plansOfferingsCmd(), a.plansBuyCmd(), a.plansListCmd(), a.plansShowCmd(), a.plansCancelCmd())
	return cmd
}

func (a *app) plansOfferingsCmd() *cobra.Command {
	var (
		q                                     client.PlanOfferingsQuery
		duration, startAfter, endBefore, zone string
	)
	cmd := &cobra.Command{
		Use:   "offerings --type TYPE --count N --duration D [flags]",
		Short: "Search priced offerings for a training plan",
		Long: `Search priced offerings for a training plan: COUNT instances of TYPE for a
total DURATION inside the window from --start-after to --end-before. When no
single window is free, or a split one finishes sooner, the plan comes in up
to --max-segments blocks (segments) of the same type, count and zone, with
gaps between them. The earliest to finish come first; buy one before it
expires with "capblock plans buy ROW", the row's number in the table (the
search is remembered beside the login), or "capblock plans buy OFFERING_ID".
Relative dates (now, +5d, tomorrow) are read from the server's clock.`,
		Example: `  capblock plans offerings --type h100.8x --count 4 --duration 72h --start-after tomorrow --end-before +14d
  capblock plans offerings --type h100.8x --count 4 --duration 2w --max-segments 4`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if duration == "" {
				return usagef("give the plan's total --duration, e.g. 72h or 2w")
			}
			if q.DurationHours, err = parseHours("--duration", duration); err != nil {
				return err
			}
			if q.MaxSegments < 1 || q.MaxSegments > 4 {
				return usagef("--max-segments %d: a plan has 1 to 4 segments", q.MaxSegments)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := a.parseDates(cmd.Context(), c,
				dateFlag{"--start-after", startAfter, &q.StartAfter},
				dateFlag{"--end-before", endBefore, &q.EndBefore}); err != nil {
				return err
			}
			if endBefore == "" {
				q.EndBefore = q.StartAfter.Add(defaultStartWindow + time.Duration(q.DurationHours)*time.Hour)
			}
			q.Zone = zone
			offerings, err := c.PlanOfferings(cmd.Context(), q)
			if err != nil {
				return err
			}
			ids := make([]string, len(offerings))
			var expires time.Time
			for i, o := range offerings {
				ids[i] = o.OfferingID
				if expires.IsZero() || o.ExpiresAt.Before(expires) {
					expires = o.ExpiresAt
				}
			}
			a.rememberSearch(planSearch, ids, expires)
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"planOfferings": offerings})
			}
			if len(offerings) == 0 {
				a.note("no plan fits: try a wider window (--start-after/--end-before), more --max-segments, a smaller --count or another --zone")
				return nil
			}
			if err := a.printPlanOfferings(offerings); err != nil {
				return err
			}
			a.note("buy one with: capblock plans buy ROW, e.g. capblock plans buy 1 (quotes expire at %s)", fmtZoned(expires))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.InstanceType, "type", "", "instance type, e.g. h100.8x")
	f.IntVar(&q.InstanceCount, "count", 1, "number of instances in every segment")
	f.StringVar(&duration, "duration", "", "total length, summed over the segments, e.g. 72h or 2w")
	f.IntVar(&q.MaxSegments, "max-segments", 2, "at most this many segments (1 to 4)")
	f.StringVar(&startAfter, "start-after", "now", "earliest start, e.g. tomorrow, +6h or 2026-12-01")
	f.StringVar(&endBefore, "end-before", "", "latest end, e.g. +14d (default: 14 days plus the duration after --start-after)")
	f.StringVar(&zone, "zone", "", "only this zone (default: all zones)")
	f.StringVar(&q.Target, "target", "", "what the plan is for: training-job (default) or cluster")
	f.IntVar(&q.MaxResults, "max-results", 0, "at most this many offerings (default: the server's, 6)")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

func (a *app) plansBuyCmd() *cobra.Command {
	var req client.BuyPlanRequest
	cmd := &cobra.Command{
		Use:   "buy (ROW | PLAN_OFFERING_ID)",
		Short: "Buy a plan offering: each segment becomes a block",
		Long: `Buy a plan offering found with "capblock plans offerings" (ROW is its row
number in the last search's table, PLAN_OFFERING_ID its id): all its
segments become blocks at once, or none does. A quote buys one plan: the
purchase carries a client token made from the offering id (unless
--client-token is given), so buying the same quote again returns the plan it
bought instead of buying twice.`,
		Example: `  capblock plans buy 1 --name llama-pretrain
  capblock plans buy tpo-… --name llama-pretrain`,
		Args: exactlyOne("row number or plan offering id (from 'capblock plans offerings')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if req.Team, err = teamFlag(cmd.Context(), c, req.Team); err != nil {
				return err
			}
			var row string
			if req.OfferingID, row, err = a.offeringArg(planSearch, args[0], a.creds.url); err != nil {
				return err
			}
			ownToken := req.ClientToken == ""
			if ownToken {
				req.ClientToken = quoteToken(req.OfferingID)
			}
			p, err := c.BuyPlan(cmd.Context(), req)
			if err != nil {
				return rowError(row, boughtBefore(planThing, err, ownToken))
			}
			if a.jsonOutput() {
				return a.printJSON(struct {
					client.Plan
					ClientToken string `json:"clientToken"`
				}{p, req.ClientToken})
			}
			if err := a.printPlan(p); err != nil {
				return err
			}
			a.note("client token: %s (to retry this purchase safely, pass --client-token %s)", req.ClientToken, req.ClientToken)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "a name for the plan")
	f.StringVar(&req.ClientToken, "client-token", "", "idempotency token (default: one made from the offering id)")
	f.StringVar(&req.Team, "team", "", "buy for this team (an admin's choice; default: your own team)")
	return cmd
}

func (a *app) plansListCmd() *cobra.Command {
	var filters *listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your plans",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := filters.check(); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			f, err := filters.filter(cmd.Context(), c)
			if err != nil {
				return err
			}
			plans, err := c.PlansMatching(cmd.Context(), f)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"plans": plans})
			}
			if len(plans) == 0 {
				a.none(filters, "plans", "find one to buy with 'capblock plans offerings'")
				return nil
			}
			// The zone only with -o wide: 120 columns hold the rest with
			// a name cut short, not the zone as well.
			cols := []string{"ID", "NAME", "STATE", "INSTANCES", "SEGMENTS", "START (UTC)", "END (UTC)", "HOURS", "FEE"}
			if a.wideOutput() {
				cols = slices.Insert(cols, 4, "ZONE")
			}
			t := a.newTable(cols...).clipToFit("NAME")
			for _, p := range plans {
				typ, count, zone, start, end, hours := planShape(p)
				row := []string{p.ID, orDash(p.Name), p.State, count + " × " + typ, strconv.Itoa(len(p.Segments)), start, end, hours, p.UpfrontFee.String()}
				if a.wideOutput() {
					row = slices.Insert(row, 4, zone)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	filters = addListFlags(cmd, "plans", planStates, false)
	return cmd
}

func (a *app) plansShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show PLAN",
		Short: "Show one plan and its segments (PLAN: its id, or its name when no other plan has it)",
		Args:  exactlyOne("plan id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := planID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			p, err := c.Plan(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(p)
			}
			return a.printPlan(p)
		},
	}
}

// printPlanOfferings writes one line per offering, its segments and the
// gaps between them in one column, and with -o wide the full id last.
func (a *app) printPlanOfferings(offerings []client.PlanOffering) error {
	cols := []string{"#", "TYPE", "COUNT", "ZONE", "START (UTC)", "END (UTC)", "HOURS", "SEGMENTS", "FEE", "ON-DEMAND", "SAVINGS"}
	if a.wideOutput() {
		cols = append(cols, "OFFERING ID")
	}
	t := a.newTable(cols...)
	for i, o := range offerings {
		typ, count, zone, start, end := "-", "-", "-", "-", "-"
		var parts []string
		for j, s := range o.Segments {
			if j == 0 {
				typ, count, zone, start = s.InstanceType, strconv.Itoa(s.InstanceCount), s.Zone, fmtTime(s.StartTime)
			} else {
				parts = append(parts, fmt.Sprintf("%dh gap", int(s.StartTime.Sub(o.Segments[j-1].EndTime)/time.Hour)))
			}
			parts = append(parts, fmt.Sprintf("%dh", s.DurationHours))
			end = fmtTime(s.EndTime)
		}
		row := []string{strconv.Itoa(i + 1), typ, count, zone, start, end, strconv.Itoa(o.DurationHours), strings.Join(parts, ", "),
			o.UpfrontFee.String(), o.OnDemandFee.String(), savings(o.UpfrontFee, o.OnDemandFee)}
		if a.wideOutput() {
			row = append(row, o.OfferingID)
		}
		t.row(row...)
	}
	return t.flush()
}

// printPlan writes a plan as "key: value" lines, then its segments.
func (a *app) printPlan(p client.Plan) error {
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
	t.row("id:", p.ID)
	if p.Name != "" {
		t.row("name:", p.Name)
	}
	if p.Team != "" {
		t.row("team:", p.Team)
	}
	t.row("target:", p.Target)
	t.row("state:", p.State)
	t.row("capacity:", fmt.Sprintf("%d total, %d available, %d in use, %d unhealthy", p.Total, p.Available, p.InUse, p.Unhealthy))
	t.row("upfront fee:", p.UpfrontFee.String())
	t.row("created:", fmtZoned(p.CreatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	t = a.newTable("#", "BLOCK", "STATE", "TYPE", "COUNT", "ZONE", "START (UTC)", "END (UTC)", "HOURS")
	for i, s := range p.Segments {
		t.row(strconv.Itoa(i+1), s.BlockID, s.State, s.InstanceType, strconv.Itoa(s.InstanceCount), s.Zone,
			fmtTime(s.StartTime), fmtTime(s.EndTime), strconv.Itoa(s.DurationHours))
	}
	return t.flush()
}

// planShape is what a plan's segments share, and their span and hours.
func planShape(p client.Plan) (typ, count, zone, start, end, hours string) {
	if len(p.Segments) == 0 {
		return "-", "-", "-", "-", "-", "0"
	}
	first, last := p.Segments[0], p.Segments[len(p.Segments)-1]
	n := 0
	for _, s := range p.Segments {
		n += s.DurationHours
	}
	return first.InstanceType, strconv.Itoa(first.InstanceCount), first.Zone, fmtTime(first.StartTime), fmtTime(last.EndTime), strconv.Itoa(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
