package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

var orderThing = thingKind{noun: "order", prefix: "ord-", list: "capblock orders list"}

// ordersCmd is `capblock orders create|list|show|cancel`.
func (a *app) ordersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orders",
		Short: "Standing orders: a block request that waits until capacity frees",
		Long: `Standing orders: a block request that does not fit now waits, and when
capacity frees it is notified (the event order.fits, also to webhooks) or, with
--mode buy, bought within --max-fee, first come first served, until its
deadline; then it expires. A command that takes an ORDER takes its id (ord-…)
or its name.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.ordersCreateCmd(), a.ordersListCmd(), a.ordersShowCmd(), a.ordersCancelCmd())
	return cmd
}

func (a *app) ordersCreateCmd() *cobra.Command {
	var (
		req                                            client.OrderRequest
		duration, startAfter, endBefore, deadline, fee string
	)
	cmd := &cobra.Command{
		Use:   "create --type TYPE --count N --duration D --start-after DATE --end-before DATE [flags]",
		Short: "Place a standing order",
		Example: `  capblock orders create --type h100.8x --count 4 --duration 48h --start-after tomorrow --end-before +14d \
      --mode buy --max-fee 20000.00`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if duration == "" {
				return usagef("give the block's --duration, e.g. 8h or 2d")
			}
			if req.DurationHours, err = parseHours("--duration", duration); err != nil {
				return err
			}
			switch req.Mode {
			case "notify", "buy":
			default:
				return usagef("--mode %q: notify (tell me when it fits) or buy (buy it within --max-fee)", req.Mode)
			}
			if fee != "" {
				m, err := parseFee(fee)
				if err != nil {
					return err
				}
				req.MaxFee = &m
			} else if req.Mode == "buy" {
				return usagef("--mode buy needs --max-fee, the most the block may cost, e.g. --max-fee 20000.00")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if req.Team, err = teamFlag(cmd.Context(), c, req.Team); err != nil {
				return err
			}
			var until time.Time
			if err := a.parseDates(cmd.Context(), c,
				dateFlag{"--start-after", startAfter, &req.StartAfter},
				dateFlag{"--end-before", endBefore, &req.EndBefore},
				dateFlag{"--deadline", deadline, &until}); err != nil {
				return err
			}
			if req.EndBefore.IsZero() {
				return usagef("give the latest end with --end-before, e.g. +14d")
			}
			if !until.IsZero() {
				req.Deadline = &until
			}
			o, err := c.CreateOrder(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(o)
			}
			if err := a.printOrder(o); err != nil {
				return err
			}
			a.note("watch it with: capblock orders show %s (or capblock events --follow)", o.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.InstanceType, "type", "", "instance type, e.g. h100.8x")
	f.IntVar(&req.InstanceCount, "count", 1, "number of instances")
	f.StringVar(&duration, "duration", "", "the block's length, e.g. 8h or 2d")
	f.StringVar(&startAfter, "start-after", "now", "earliest start, e.g. tomorrow or 2026-12-01")
	f.StringVar(&endBefore, "end-before", "", "latest end, e.g. +14d")
	f.StringVar(&deadline, "deadline", "", "give up at this time (default: the latest start that still ends by --end-before)")
	f.StringVar(&req.Mode, "mode", "notify", "notify (tell me when it fits) or buy (buy it within --max-fee)")
	f.StringVar(&fee, "max-fee", "", `the most the block may cost, e.g. 20000.00 or "20000.00 USD" (default currency USD)`)
	f.StringVar(&req.Zone, "zone", "", "only this zone (default: any)")
	f.StringVar(&req.Name, "name", "", "a name for the order (and its block)")
	f.StringVar(&req.Team, "team", "", "order for this team (an admin's choice; default: your own team)")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

// parseFee reads "20000.00" or "20000.00 USD".
func parseFee(s string) (client.Money, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 2 {
		return client.Money{}, usagef("--max-fee %q: write an amount, optionally with its currency, e.g. 20000.00 or \"20000.00 USD\"", s)
	}
	if _, err := strconv.ParseFloat(fields[0], 64); err != nil {
		return client.Money{}, usagef("--max-fee %q: %q is not an amount, e.g. 20000.00", s, fields[0])
	}
	m := client.Money{Amount: fields[0], Currency: "USD"}
	if len(fields) == 2 {
		m.Currency = strings.ToUpper(fields[1])
	}
	return m, nil
}

func (a *app) ordersListCmd() *cobra.Command {
	var filters *listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your standing orders, oldest first",
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
			orders, err := c.OrdersMatching(cmd.Context(), f)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"orders": orders})
			}
			if len(orders) == 0 {
				a.none(filters, "standing orders", "place one with 'capblock orders create'")
				return nil
			}
			t := a.newTable("ID", "STATE", "MODE", "INSTANCES", "HOURS", "START AFTER (UTC)", "DEADLINE (UTC)", "BLOCK")
			for _, o := range orders {
				t.row(o.ID, o.State, o.Mode, fmt.Sprintf("%d×%s", o.InstanceCount, o.InstanceType), strconv.Itoa(o.DurationHours),
					fmtTime(o.StartAfter), fmtTime(o.Deadline), orDash(o.BlockID))
			}
			return t.flush()
		},
	}
	filters = addListFlags(cmd, "orders", orderStates, false)
	return cmd
}

func (a *app) ordersShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ORDER",
		Short: "Show one standing order, and why it waits",
		Args:  exactlyOne("order id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := orderID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			o, err := c.Order(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(o)
			}
			return a.printOrder(o)
		},
	}
}

func (a *app) ordersCancelCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "cancel ORDER [--yes]",
		Short: "Withdraw an open standing order",
		Long: `Withdraw an open standing order: nothing is bought for it from then on.
It first says which order and asks for confirmation (--yes does not ask;
without a terminal to answer, --yes is needed).`,
		Args: exactlyOne("order id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "cancel"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := orderID(ctx, c, args[0])
			if err != nil {
				return err
			}
			o, err := c.Order(ctx, id)
			if err != nil {
				return err
			}
			label := o.ID
			if o.Name != "" {
				label = fmt.Sprintf("%s (%s)", o.ID, o.Name)
			}
			what := fmt.Sprintf("withdrawing order %s: %s, %s %d × %s for %dh by %s; nothing is bought for it from then on",
				label, o.State, o.Mode, o.InstanceCount, o.InstanceType, o.DurationHours, fmtZoned(o.EndBefore))
			if err := a.confirm(yes, what, "Withdraw it?", "order "+o.ID+" was not withdrawn"); err != nil {
				return err
			}
			o, err = c.CancelOrder(ctx, id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(o)
			}
			return a.printOrder(o)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "withdraw without asking")
	return cmd
}

// orderID returns the id of the order that arg names (resolve).
func orderID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, orderThing, arg, orderThings(c))
}

// orderThings lists the caller's orders as names are looked up among them.
func orderThings(c *client.Client) func(context.Context) ([]namedThing, error) {
	return func(ctx context.Context) ([]namedThing, error) {
		orders, err := c.Orders(ctx)
		things := make([]namedThing, len(orders))
		for i, o := range orders {
			things[i] = namedThing{o.ID, o.Name, o.State}
		}
		return things, err
	}
}

// printOrder writes an order as "key: value" lines.
func (a *app) printOrder(o client.Order) error {
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
	t.row("id:", o.ID)
	if o.Name != "" {
		t.row("name:", o.Name)
	}
	if o.Team != "" {
		t.row("team:", o.Team)
	}
	t.row("state:", o.State)
	t.row("mode:", o.Mode)
	zone := o.Zone
	if zone == "" {
		zone = "any zone"
	}
	t.row("request:", fmt.Sprintf("%d × %s for %dh in %s", o.InstanceCount, o.InstanceType, o.DurationHours, zone))
	t.row("window:", fmtZoned(o.StartAfter)+" to "+fmtZoned(o.EndBefore))
	t.row("deadline:", fmtZoned(o.Deadline))
	if o.MaxFee != nil {
		t.row("max fee:", o.MaxFee.Amount+" "+o.MaxFee.Currency)
	}
	if o.BlockID != "" {
		t.row("block:", o.BlockID)
	}
	if o.Reason != "" {
		t.row("waiting:", o.Reason)
	}
	t.row("created:", fmtZoned(o.CreatedAt))
	return t.flush()
}
