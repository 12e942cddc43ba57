package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
)

// liveStates are the states of a block that cancelling ends.
var liveStates = []string{"payment-pending", "scheduled", "active"}

func (a *app) plansCancelCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "cancel PLAN [--yes]",
		Short: "Cancel what is left of a plan: its segments still to come or active (refund per the operator's policy)",
		Long: `Cancel what is left of a training plan: every segment still to come is
cancelled and the active one released early, each refunded as 'blocks
cancel' would refund it under the operator's policy. Segments already
ended stay as they are. It first shows each segment and its refund and asks
for confirmation (--yes does not ask; without a terminal to answer, --yes is
needed), then says what was refunded, read from the team's ledger.`,
		Args: exactlyOne("plan id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "cancel"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := planID(ctx, c, args[0])
			if err != nil {
				return err
			}
			p, err := c.Plan(ctx, id)
			if err != nil {
				return err
			}
			now, err := c.Now(ctx)
			if err != nil {
				return err
			}
			policy, err := c.Policy(ctx)
			if err != nil {
				return err
			}
			var lines []string
			for _, s := range p.Segments {
				if !slices.Contains(liveStates, s.State) {
					continue
				}
				b, err := c.Block(ctx, s.BlockID)
				if err != nil {
					return err
				}
				refund, err := c.CancelQuote(ctx, s.BlockID)
				if err != nil {
					return err
				}
				lines = append(lines, fmt.Sprintf("  segment %s: %s, %s to %s, fee %s; %s",
					b.ID, b.State, fmtTime(b.StartTime), fmtZoned(b.EndTime), b.UpfrontFee, refundPreview(b, now, policy, refund)))
			}
			label := p.ID
			if p.Name != "" {
				label = fmt.Sprintf("%s (%s)", p.ID, p.Name)
			}
			if len(lines) == 0 {
				// Asking to confirm what the server would refuse helps no one.
				return fmt.Errorf("plan %s is %s: no segment is still to come or active, so there is nothing to cancel", label, p.State)
			}
			a.note("cancelling plan %s (%s, %d × %s): %d of its %d segments", label, p.State, p.Segments[0].InstanceCount, p.Segments[0].InstanceType, len(lines), len(p.Segments))
			for _, l := range lines[:len(lines)-1] {
				a.note("%s", l)
			}
			if err := a.confirm(yes, lines[len(lines)-1], "Cancel it?", "plan "+p.ID+" was not cancelled"); err != nil {
				return err
			}
			cancelled, err := c.CancelPlan(ctx, id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				err = a.printJSON(cancelled)
			} else {
				err = a.printPlan(cancelled)
			}
			if err != nil {
				return err
			}
			var total int64
			currency := cancelled.UpfrontFee.Currency
			for _, s := range cancelled.Segments {
				minor, _, ok := refunded(ctx, c, cancelled.Team, s.BlockID, currency)
				if !ok {
					a.note("cancelled plan %s; its refunds are in the team's ledger ('capblock teams ledger %s')", cancelled.ID, cancelled.Team)
					return nil
				}
				total += minor
			}
			if total == 0 {
				a.note("cancelled plan %s: nothing was refunded", cancelled.ID)
			} else {
				a.note("cancelled plan %s: refunded %s", cancelled.ID, formatMinor(total, currency))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "cancel without asking")
	return cmd
}
