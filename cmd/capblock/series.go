package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

var seriesThing = thingKind{noun: "series", prefix: "cs-", list: "capblock series list"}

// seriesCmd is `capblock series search|buy|list|show|cancel`.
func (a *app) seriesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "series",
		Short: "Recurring blocks: the same window on days of the week, bought at once",
		Long: `Recurring blocks: the same window on days of the week in a time zone's wall
time (e.g. every weekday 09:00-17:00 Europe/Madrid for 4 weeks), searched and
bought at once, each occurrence a block. Occurrences follow the zone's
daylight-saving changes. Cancel one occurrence with 'capblock blocks cancel
BLOCK'. A command that takes a SERIES takes its id (cs-…) or its name.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.seriesSearchCmd(), a.seriesBuyCmd(), a.seriesListCmd(), a.seriesShowCmd(), a.seriesCancelCmd())
	return cmd
}

func (a *app) seriesSearchCmd() *cobra.Command {
	var (
		q    client.SeriesSearch
		days string
	)
	cmd := &cobra.Command{
		Use:   "search --type TYPE --count N --from DATE (--to DATE | --weeks N) [flags]",
		Short: "Quote a recurring window: every occurrence, whether it fits, its fee",
		Long: `Quote a recurring window in each zone of the type: COUNT instances of TYPE on
--days from --start to --end (local wall time in --tz), from --from to --to
(dates) or for --weeks weeks. By default a series is bought whole or not at
all: when an occurrence does not fit, the table says why and the row cannot be
bought; with --partial the occurrences that fit are offered. Buy a row with
"capblock series buy ROW".`,
		Example: `  capblock series search --type l4.1x --count 4 --days weekdays --start 09:00 --end 17:00 \
      --tz Europe/Madrid --from 2027-03-22 --weeks 4`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if q.FromDate == "" {
				return usagef("give the first date with --from, e.g. --from 2027-03-22")
			}
			if (q.ToDate == "") == (q.Weeks == 0) {
				return usagef("give the last date with --to, or a number of --weeks (one of them)")
			}
			q.DaysOfWeek = strings.Split(days, ",")
			c, err := a.client()
			if err != nil {
				return err
			}
			offers, err := c.SeriesOfferings(cmd.Context(), q)
			if err != nil {
				return err
			}
			ids := make([]string, len(offers))
			var expires time.Time
			for i, o := range offers {
				ids[i] = o.OfferingID
				if expires.IsZero() || o.ExpiresAt.Before(expires) {
					expires = o.ExpiresAt
				}
			}
			a.rememberSearch(seriesSearch, ids, expires)
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"seriesOfferings": offers})
			}
			if len(offers) == 0 {
				a.note("no zone holds %s", q.InstanceType)
				return nil
			}
			if err := a.printSeriesOfferings(offers); err != nil {
				return err
			}
			if offers[0].OfferingID == "" {
				a.note("not every occurrence fits, so the series cannot be bought whole; add --partial to buy the ones that fit")
				return nil
			}
			a.note("buy one with: capblock series buy ROW, e.g. capblock series buy 1 (quotes expire at %s)", fmtZoned(expires))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&q.InstanceType, "type", "", "instance type, e.g. l4.1x")
	f.IntVar(&q.InstanceCount, "count", 1, "number of instances at every occurrence")
	f.StringVar(&days, "days", "weekdays", "days of the week: mon,tue,… or weekdays or weekend")
	f.StringVar(&q.StartTime, "start", "09:00", "local start time HH:MM")
	f.StringVar(&q.EndTime, "end", "17:00", "local end time HH:MM (at or before --start: the next day)")
	f.StringVar(&q.TimeZone, "tz", "UTC", "time zone of the times, e.g. Europe/Madrid")
	f.StringVar(&q.FromDate, "from", "", "first date, YYYY-MM-DD")
	f.StringVar(&q.ToDate, "to", "", "last date, YYYY-MM-DD (or --weeks)")
	f.IntVar(&q.Weeks, "weeks", 0, "number of weeks from --from (or --to)")
	f.StringVar(&q.Zone, "zone", "", "only this zone (default: every zone)")
	f.BoolVar(&q.Partial, "partial", false, "offer the occurrences that fit when some do not")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

func (a *app) seriesBuyCmd() *cobra.Command {
	var req client.BuySeriesRequest
	cmd := &cobra.Command{
		Use:   "buy (ROW | SERIES_OFFERING_ID)",
		Short: "Buy a series offering: every occurrence it quotes becomes a block, at once",
		Long: `Buy a series offering found with "capblock series search" (ROW is its row
number in the last search's table): all its occurrences become blocks at once,
or none does. Buying the same quote again returns the series it bought.`,
		Example: `  capblock series buy 1 --name workshop`,
		Args:    exactlyOne("row number or series offering id (from 'capblock series search')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if req.Team, err = teamFlag(cmd.Context(), c, req.Team); err != nil {
				return err
			}
			var row string
			if req.OfferingID, row, err = a.offeringArg(seriesSearch, args[0], a.creds.url); err != nil {
				return err
			}
			if req.OfferingID == "" {
				return fmt.Errorf("%s cannot be bought: not every occurrence fits; search again with --partial to buy the ones that fit", row)
			}
			ownToken := req.ClientToken == ""
			if ownToken {
				req.ClientToken = quoteToken(req.OfferingID)
			}
			s, err := c.BuySeries(cmd.Context(), req)
			if err != nil {
				return rowError(row, boughtBefore(seriesThing, err, ownToken))
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			if err := a.printSeries(s); err != nil {
				return err
			}
			a.note("client token: %s (to retry this purchase safely, pass --client-token %s)", req.ClientToken, req.ClientToken)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Name, "name", "", "a name for the series (its blocks are named after it)")
	f.StringVar(&req.ClientToken, "client-token", "", "idempotency token (default: one made from the offering id)")
	f.StringVar(&req.Team, "team", "", "buy for this team (an admin's choice; default: your own team)")
	return cmd
}

func (a *app) seriesListCmd() *cobra.Command {
	var filters *listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your series",
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
			list, err := c.SeriesMatching(cmd.Context(), f)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"series": list})
			}
			if len(list) == 0 {
				a.none(filters, "series", "find one to buy with 'capblock series search'")
				return nil
			}
			t := a.newTable("ID", "NAME", "STATE", "INSTANCES", "SCHEDULE", "BLOCKS", "FEE").clipToFit("NAME", "SCHEDULE")
			for _, s := range list {
				t.row(s.ID, orDash(s.Name), s.State, fmt.Sprintf("%d×%s", s.InstanceCount, s.InstanceType),
					scheduleText(s.Schedule), liveCount(s), s.UpfrontFee.String())
			}
			return t.flush()
		},
	}
	filters = addListFlags(cmd, "series", seriesStates, false)
	return cmd
}

func (a *app) seriesShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show SERIES",
		Short: "Show one series and its occurrences",
		Args:  exactlyOne("series id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := seriesID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			s, err := c.Series(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			return a.printSeries(s)
		},
	}
}

func (a *app) seriesCancelCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "cancel SERIES [--yes]",
		Short: "Cancel every occurrence not yet ended, each refunded per the operator's policy",
		Long: `Cancel every occurrence of a series that has not ended: one still to come is
cancelled, an active one released early, each refunded per the operator's
policy. It first names the occurrences it will cancel and the refund the
server quotes for them in total, and asks for confirmation (--yes does not
ask; without a terminal to answer, --yes is needed). To cancel one
occurrence only, cancel its block: capblock blocks cancel BLOCK.`,
		Args: exactlyOne("series id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "cancel"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := seriesID(ctx, c, args[0])
			if err != nil {
				return err
			}
			s, err := c.Series(ctx, id)
			if err != nil {
				return err
			}
			what, err := seriesCancelPreview(ctx, c, s)
			if err != nil {
				return err
			}
			if err := a.confirm(yes, what, "Cancel them?", "series "+s.ID+" was not cancelled"); err != nil {
				return err
			}
			s, err = c.CancelSeries(ctx, id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			return a.printSeries(s)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "cancel without asking")
	return cmd
}

// seriesCancelPreview says what cancelling s cancels: how many of its
// occurrences, which, and their refund in total, the sum of the server's
// quote for each (GET /v1/blocks/{id}/cancel-quote; the series has none
// of its own).
func seriesCancelPreview(ctx context.Context, c *client.Client, s client.Series) (string, error) {
	label := s.ID
	if s.Name != "" {
		label = fmt.Sprintf("%s (%s)", s.ID, s.Name)
	}
	var names []string
	var total int64
	currency, summed := s.UpfrontFee.Currency, true
	for _, b := range s.Occurrences {
		if !slices.Contains(liveStates, b.State) {
			continue
		}
		names = append(names, fmt.Sprintf("%s (%s, %s)", b.BlockID, localText(b.LocalStartTime), b.State))
		refund, err := c.CancelQuote(ctx, b.BlockID)
		if err != nil {
			return "", err
		}
		minor, ok := money(refund)
		summed = summed && ok && refund.Currency == currency
		total += minor
	}
	if len(names) == 0 {
		// Asking to confirm what the server would refuse helps no one.
		return "", fmt.Errorf("series %s is %s: it has no occurrence left to cancel", label, s.State)
	}
	refund := "each refunded per the operator's policy"
	if summed {
		refund = "refund " + formatMinor(total, currency) + " in total (the operator's policy)"
	}
	return fmt.Sprintf("cancelling series %s: %d of %d occurrences, those not yet ended, %d × %s in %s; %s: %s",
		label, len(names), len(s.Occurrences), s.InstanceCount, s.InstanceType, s.Zone, refund, strings.Join(names, ", ")), nil
}

// seriesID returns the id of the series that arg names (resolve).
func seriesID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, seriesThing, arg, seriesThings(c))
}

// seriesThings lists the caller's series as names are looked up among them.
func seriesThings(c *client.Client) func(context.Context) ([]namedThing, error) {
	return func(ctx context.Context) ([]namedThing, error) {
		list, err := c.SeriesList(ctx)
		things := make([]namedThing, len(list))
		for i, s := range list {
			things[i] = namedThing{s.ID, s.Name, s.State}
		}
		return things, err
	}
}

// printSeriesOfferings writes one row per zone, then the occurrences of
// the first (the best).
func (a *app) printSeriesOfferings(offers []client.SeriesOffering) error {
	t := a.newTable("#", "ZONE", "TYPE", "COUNT", "FITS", "FIRST (UTC)", "LAST (UTC)", "FEE", "ON-DEMAND", "BUYABLE")
	for i, o := range offers {
		first, last := "-", "-"
		if n := len(o.Occurrences); n > 0 {
			first, last = fmtTime(o.Occurrences[0].StartTime), fmtTime(o.Occurrences[n-1].EndTime)
		}
		buyable := "yes"
		if o.OfferingID == "" {
			buyable = "no"
		}
		t.row(strconv.Itoa(i+1), o.Zone, o.InstanceType, strconv.Itoa(o.InstanceCount), fmt.Sprintf("%d of %d", o.Fitting, len(o.Occurrences)),
			first, last, o.UpfrontFee.String(), o.OnDemandFee.String(), buyable)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\noccurrences in %s (row 1):\n", offers[0].Zone)
	t = a.newTable("#", "LOCAL START", "LOCAL END", "START (UTC)", "HOURS", "FITS", "FEE OR WHY NOT")
	for i, oc := range offers[0].Occurrences {
		why := "-"
		if oc.UpfrontFee != nil {
			why = oc.UpfrontFee.String()
		}
		if !oc.Fits {
			why = clip(oc.Reason, 40)
		}
		t.row(strconv.Itoa(i+1), localText(oc.LocalStartTime), localClock(oc.LocalEndTime), fmtTime(oc.StartTime),
			strconv.Itoa(oc.DurationHours), yesNo(oc.Fits), why)
	}
	return t.flush()
}

// printSeries writes a series as "key: value" lines, then its occurrences.
func (a *app) printSeries(s client.Series) error {
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
	t.row("id:", s.ID)
	if s.Name != "" {
		t.row("name:", s.Name)
	}
	if s.Team != "" {
		t.row("team:", s.Team)
	}
	t.row("state:", s.State)
	t.row("instances:", fmt.Sprintf("%d × %s in %s", s.InstanceCount, s.InstanceType, s.Zone))
	t.row("schedule:", fmt.Sprintf("%s, %s to %s", scheduleText(s.Schedule), s.Schedule.FromDate, s.Schedule.ToDate))
	t.row("upfront fee:", s.UpfrontFee.String())
	t.row("created:", fmtZoned(s.CreatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	t = a.newTable("#", "BLOCK", "STATE", "LOCAL START", "LOCAL END", "START (UTC)", "HOURS", "FEE")
	for i, b := range s.Occurrences {
		t.row(strconv.Itoa(i+1), b.BlockID, b.State, localText(b.LocalStartTime), localClock(b.LocalEndTime), fmtTime(b.StartTime),
			strconv.Itoa(b.DurationHours), b.UpfrontFee.String())
	}
	return t.flush()
}

// scheduleText is "mon,tue,wed,thu,fri 09:00-17:00 Europe/Madrid", with
// Monday to Friday said as weekdays.
func scheduleText(sc client.Schedule) string {
	days := strings.Join(sc.DaysOfWeek, ",")
	switch days {
	case "mon,tue,wed,thu,fri":
		days = "weekdays"
	case "sun,sat":
		days = "weekend"
	}
	return fmt.Sprintf("%s %s-%s %s", days, sc.StartTime, sc.EndTime, sc.TimeZone)
}

// liveCount is "N" blocks, or "N (L live)" when some have ended or were cancelled.
func liveCount(s client.Series) string {
	live := 0
	for _, b := range s.Occurrences {
		switch b.State {
		case "payment-pending", "scheduled", "active":
			live++
		}
	}
	if live == len(s.Occurrences) {
		return strconv.Itoa(live)
	}
	return fmt.Sprintf("%d (%d live)", len(s.Occurrences), live)
}

// localText shows an RFC 3339 local time as "Mon 2027-03-22 09:00 +01:00".
func localText(s string) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	return t.Format("Mon 2006-01-02 15:04 -07:00")
}

// localClock shows the wall clock of an RFC 3339 local time, "17:00".
func localClock(s string) string {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return s
	}
	return t.Format("15:04")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// clip cuts s to n characters, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
