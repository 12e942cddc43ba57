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

// deliveryTimeLayout shows deliveries to the second: retries come seconds
// apart.
const deliveryTimeLayout = "2006-01-02 15:04:05"

func (a *app) webhooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Have your team's events POSTed, signed, to a URL",
		Long: `A webhook POSTs each event of your team whose type it names to a URL, as the
JSON that 'capblock events' shows, with the headers Capblock-Event (the type)
and Capblock-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>">,
keyed with the webhook's secret. A delivery that fails (no answer, or a
status other than 2xx) is retried with growing waits; a webhook gets its
events in order.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(a.webhooksCreateCmd(), a.webhooksListCmd(), a.webhooksDeleteCmd(), a.webhooksDeliveriesCmd())
	return cmd
}

func (a *app) webhooksCreateCmd() *cobra.Command {
	var (
		events []string
		team   string
	)
	// The receiver's URL is an argument: --url names the capblock server.
	cmd := &cobra.Command{
		Use:   "create URL --event PATTERN [--event PATTERN…]",
		Short: "Create a webhook that POSTs the events to URL; its signing secret is shown once",
		Example: `  capblock webhooks create https://example.com/capblock --event 'block.*'
  capblock webhooks create https://example.com/capblock --event block.active --event block.expired`,
		Args: exactlyOne("receiver's URL (http:// or https://)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if team, err = teamFlag(cmd.Context(), c, team); err != nil {
				return err
			}
			w, err := c.CreateWebhook(cmd.Context(), client.NewWebhook{URL: args[0], Events: events, Team: team})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if err := a.printJSON(w); err != nil {
					return err
				}
			} else {
				t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
				t.row("secret:", w.Secret)
				t.row("id:", w.ID)
				t.row("team:", w.Team)
				t.row("url:", w.URL)
				t.row("events:", strings.Join(w.Events, ","))
				if err := t.flush(); err != nil {
					return err
				}
			}
			a.note("the secret is shown only now: give it to the receiver, which checks each delivery's Capblock-Signature with it; see deliveries with 'capblock webhooks deliveries %s'", w.ID)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&events, "event", nil, "an event type (block.active), a prefix (block.*, plan.*, job.*) or * for all; repeat for more")
	cmd.Flags().StringVar(&team, "team", "", "the team whose events to send (admin; default: your own)")
	_ = cmd.MarkFlagRequired("event")
	return cmd
}

func (a *app) webhooksListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List webhooks (never their secrets): every team's for an admin, your team's otherwise",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			hooks, err := c.Webhooks(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"webhooks": hooks})
			}
			t := a.newTable("ID", "TEAM", "EVENTS", "CREATED (UTC)", "URL").clipToFit("TEAM", "EVENTS", "URL")
			for _, w := range hooks {
				t.row(w.ID, w.Team, strings.Join(w.Events, ","), fmtTime(w.CreatedAt), w.URL)
			}
			return t.flush()
		},
	}
}

func (a *app) webhooksDeleteCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "delete WEBHOOK_ID [--yes]",
		Aliases: []string{"rm"},
		Short:   "Delete a webhook and its delivery log; deliveries not yet made are dropped",
		Long: `Delete a webhook and its delivery log; deliveries not yet made are dropped.
It first says what it deletes and asks for confirmation (--yes does not
ask; without a terminal to answer, --yes is needed).`,
		Args: exactlyOne("webhook id (from 'capblock webhooks list')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "delete"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			what := fmt.Sprintf("deleting webhook %s: its delivery log goes with it, and deliveries not yet made are dropped", args[0])
			if w, ok := findWebhook(ctx, c, args[0]); ok {
				what = fmt.Sprintf("deleting webhook %s (team %s, %s, events %s): its delivery log goes with it, and deliveries not yet made are dropped",
					w.ID, w.Team, w.URL, strings.Join(w.Events, ","))
			}
			if err := a.confirm(yes, what, "Delete it?", "webhook "+args[0]+" was not deleted"); err != nil {
				return err
			}
			w, err := c.DeleteWebhook(ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(w)
			}
			a.note("deleted webhook %s (%s)", w.ID, w.URL)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	return cmd
}

// findWebhook looks webhook id up in the caller's list, to describe it;
// ok is false when it is not there (the server then answers for it).
func findWebhook(ctx context.Context, c *client.Client, id string) (client.Webhook, bool) {
	list, err := c.Webhooks(ctx)
	if err != nil {
		return client.Webhook{}, false
	}
	for _, w := range list {
		if w.ID == id {
			return w, true
		}
	}
	return client.Webhook{}, false
}

func (a *app) webhooksDeliveriesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "deliveries WEBHOOK_ID",
		Short: "A webhook's delivery log, oldest first: each event scheduled (attempt 0) and each attempt",
		Args:  exactlyOne("webhook id (from 'capblock webhooks list')"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ds, err := c.WebhookDeliveries(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"deliveries": ds})
			}
			t := a.newTable("EVENT", "ATTEMPT", "TIME (UTC)", "RESULT", "NEXT ATTEMPT (UTC)").clipToFit("RESULT")
			for _, d := range ds {
				next := "-"
				if d.NextAttemptAt != nil {
					next = fmtDeliveryTime(*d.NextAttemptAt)
				}
				t.row(d.EventID, strconv.Itoa(d.Attempt), fmtDeliveryTime(d.Time), deliveryResult(d), next)
			}
			return t.flush()
		},
	}
}

// deliveryResult says in a few words how a log line ended.
func deliveryResult(d client.Delivery) string {
	switch {
	case d.Attempt == 0:
		return "scheduled"
	case d.Error != "":
		return d.Error
	case d.Done:
		return "delivered (" + strconv.Itoa(d.StatusCode) + ")"
	}
	return strconv.Itoa(d.StatusCode)
}

func fmtDeliveryTime(t time.Time) string { return t.UTC().Format(deliveryTimeLayout) }
