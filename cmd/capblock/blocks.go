package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

func (a *app) blocksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "blocks",
		Short: "List, inspect, cancel, extend, transfer and release your capacity blocks",
		Long: `List, inspect, cancel, extend, transfer and release your capacity blocks. A command that takes a
BLOCK takes its id (cb-…) or its name, when no other block you can see has
that name.`,
		RunE: groupRunE,
	}
	cmd.AddCommand(
		a.blocksListCmd(),
		a.blocksShowCmd(),
		a.blocksStatusCmd(),
		a.blocksCancelCmd(),
		a.blocksApproveCmd(),
		a.blocksExtensionOfferingsCmd(),
		a.blocksExtendCmd(),
		a.blocksTransferCmd(),
		a.blocksReleaseCmd(),
		a.blocksLendCmd(),
	)
	return cmd
}

func (a *app) blocksListCmd() *cobra.Command {
	var filters *listFlags
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your blocks",
		Example: `  capblock blocks list --state scheduled,active
  capblock blocks list --team research --tag env=prod --tag owner=ada`,
		Args: noArgs,
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
			blocks, err := c.BlocksMatching(cmd.Context(), client.BlockFilter{ListFilter: f, Tags: filters.tags})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"blocks": blocks})
			}
			if len(blocks) == 0 {
				a.none(filters, "blocks", "find one to buy with 'capblock offerings'")
				return nil
			}
			var teams map[string]string
			if severalTeams(blocks) || isAdmin(cmd.Context(), c) {
				teams = teamNames(cmd.Context(), c)
			}
			return a.printBlocks(blocks, teams)
		},
	}
	filters = addListFlags(cmd, "blocks", blockStates, true)
	return cmd
}

func (a *app) blocksShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show BLOCK",
		Short: "Show one block (BLOCK: its id, or its name when no other block has it)",
		Args:  exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			b, err := c.Block(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.showBlock(b)
		},
	}
}

func (a *app) blocksStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status BLOCK",
		Short: "Show a block's capacity and where it is placed",
		Args:  exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			s, err := c.BlockStatus(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(s)
			}
			return a.printStatus(s)
		},
	}
}

func (a *app) printStatus(s client.BlockStatus) error {
	capacity := fmt.Sprintf("%d total, %d available, %d unavailable", s.TotalCapacity, s.AvailableCapacity, s.UnavailableCapacity)
	if s.Degraded {
		capacity += " (degraded: no free node to replace a failed one)"
	}
	placement := "final"
	if !s.LockInTime.IsZero() {
		placement = "final since its lock-in at " + fmtZoned(s.LockInTime)
	}
	if !s.PlacementFinal {
		placement = "tentative until " + fmtZoned(s.LockInTime) + " (may still move)"
	}
	t := a.newTable("capacity:", capacity)
	t.row("placement:", placement)
	if err := t.flush(); err != nil {
		return err
	}
	if len(s.Placements) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	t = a.newTable("NODE", "GPUS")
	for _, p := range s.Placements {
		t.row(p.Node, formatGPUs(p.GPUs))
	}
	return t.flush()
}

func (a *app) blocksApproveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "approve BLOCK",
		Short: "Approve a block waiting in payment-pending under the approval policy (admin)",
		Args:  exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			b, err := c.ApproveBlock(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.showBlock(b)
		},
	}
}

func (a *app) blocksCancelCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "cancel BLOCK [--yes]",
		Short: "Cancel a block, or release it early once started (refund per the operator's policy)",
		Long: `Cancel a block before its start, or release it early once it has started.
It first shows the block and the refund the server quotes for it now
(under the operator's policy, GET /v1/policy) and asks for confirmation (--yes does not ask; without a
terminal to answer, --yes is needed), then says what was refunded, read
from the team's ledger.`,
		Args: exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "cancel"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(ctx, c, args[0])
			if err != nil {
				return err
			}
			b, err := c.Block(ctx, id)
			if err != nil {
				return err
			}
			if !slices.Contains(liveStates, b.State) {
				// Asking to confirm what the server would refuse helps no one.
				return fmt.Errorf("block %s is %s: only payment-pending, scheduled or active blocks can be cancelled", blockLabel(b), b.State)
			}
			now, err := c.Now(ctx)
			if err != nil {
				return err
			}
			policy, err := c.Policy(ctx)
			if err != nil {
				return err
			}
			refund, err := c.CancelQuote(ctx, id)
			if err != nil {
				return err
			}
			what := fmt.Sprintf("cancelling block %s: %s, %d × %s in %s, %s to %s, fee %s; %s",
				blockLabel(b), b.State, b.InstanceCount, b.InstanceType, b.Zone, fmtTime(b.StartTime), fmtZoned(b.EndTime), b.UpfrontFee, refundPreview(b, now, policy, refund))
			if err := a.confirm(yes, what, "Cancel it?", "block "+b.ID+" was not cancelled"); err != nil {
				return err
			}
			cancelled, err := c.CancelBlock(ctx, id)
			if err != nil {
				return err
			}
			if err := a.showBlock(cancelled); err != nil {
				return err
			}
			switch minor, amount, ok := refunded(ctx, c, cancelled.Team, cancelled.ID, cancelled.UpfrontFee.Currency); {
			case !ok:
				a.note("cancelled block %s; its refund is in the team's ledger ('capblock teams ledger %s')", cancelled.ID, cancelled.Team)
			case minor == 0:
				a.note("cancelled block %s: nothing was refunded", cancelled.ID)
			default:
				a.note("cancelled block %s: refunded %s", cancelled.ID, amount)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "cancel without asking")
	return cmd
}

func (a *app) blocksExtensionOfferingsCmd() *cobra.Command {
	var duration string
	cmd := &cobra.Command{
		Use:   "extension-offerings BLOCK --duration D",
		Short: "List offerings that extend a block by a duration",
		Args:  exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			hours, err := parseHours("--duration", duration)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			offerings, err := c.ExtensionOfferings(cmd.Context(), id, hours)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"offerings": offerings})
			}
			if len(offerings) == 0 {
				a.note("no extension of %s by %dh is available; try a shorter --duration", args[0], hours)
				return nil
			}
			if err := a.printOfferings(offerings); err != nil {
				return err
			}
			if a.wideOutput() {
				a.note("extend with: capblock blocks extend %s --offering OFFERING_ID", args[0])
			} else {
				a.note("extend with: capblock blocks extend %s --duration %s (-o wide shows the offering ids, for --offering)", args[0], duration)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&duration, "duration", "", "how much longer, e.g. 24h or 2d")
	_ = cmd.MarkFlagRequired("duration")
	return cmd
}

func (a *app) blocksExtendCmd() *cobra.Command {
	var (
		duration, offeringID string
		yes                  bool
	)
	cmd := &cobra.Command{
		Use:   "extend BLOCK (--duration D | --offering cbe-…) [--yes]",
		Short: "Extend a block: buy the best extension offering for a duration, or a given one",
		Long: `Extend a block: buy the best extension offering for --duration, or the
extension offering --offering (from 'capblock blocks extension-offerings').
It first shows the new end and the fee and asks for confirmation (--yes
does not ask; without a terminal to answer, --yes is needed), then says
what was charged. Run again with the same --offering (after a lost
answer, say), it shows the block as that offering extended it and
charges nothing again.`,
		Example: `  capblock blocks extend cb-… --duration 24h
  capblock blocks extend cb-… --offering cbe-… --yes`,
		Args: exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case duration == "" && offeringID == "":
				return usagef("give --duration (e.g. 24h) or --offering (from 'capblock blocks extension-offerings')")
			case duration != "" && offeringID != "":
				return usagef("give --duration or --offering, not both")
			}
			var hours int
			if duration != "" {
				var err error
				if hours, err = parseHours("--duration", duration); err != nil {
					return err
				}
			}
			if err := a.mayAsk(yes, "extend"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(ctx, c, args[0])
			if err != nil {
				return err
			}
			b, err := c.Block(ctx, id)
			if err != nil {
				return err
			}
			if b.State != "scheduled" && b.State != "active" {
				return fmt.Errorf("block %s is %s: only scheduled or active blocks can be extended", blockLabel(b), b.State)
			}
			what := fmt.Sprintf("extending block %s, which ends at %s, with extension offering %s for the fee it was listed with",
				blockLabel(b), fmtZoned(b.EndTime), offeringID)
			if offeringID == "" {
				offerings, err := c.ExtensionOfferings(ctx, id, hours)
				if err != nil {
					return err
				}
				if len(offerings) == 0 {
					return fmt.Errorf("no extension of block %s by %dh is available (the capacity after its end is taken, or it ends too soon); try a shorter --duration", args[0], hours)
				}
				o := offerings[0]
				offeringID = o.OfferingID
				what = fmt.Sprintf("extending block %s by %dh, from %s to %s, for %s (%s on demand)",
					blockLabel(b), o.DurationHours, fmtTime(b.EndTime), fmtZoned(o.EndTime), o.UpfrontFee, o.OnDemandFee)
			}
			if err := a.confirm(yes, what, "Extend it?", "block "+b.ID+" was not extended"); err != nil {
				return err
			}
			extended, err := c.ExtendBlock(ctx, id, offeringID)
			if err != nil {
				return err
			}
			if err := a.showBlock(extended); err != nil {
				return err
			}
			if !extended.EndTime.After(b.EndTime) {
				// The server answered a rerun: this offering extended the
				// block before, and buying it again charges nothing.
				a.note("this offering already extended block %s to %s; nothing was charged again (its fee is %s)",
					extended.ID, fmtZoned(extended.EndTime), extended.UpfrontFee)
				return nil
			}
			a.note("extended block %s to %s: charged %s (its fee is now %s)",
				extended.ID, fmtZoned(extended.EndTime), feeChange(b.UpfrontFee, extended.UpfrontFee), extended.UpfrontFee)
			return nil
		},
	}
	cmd.Flags().StringVar(&duration, "duration", "", "how much longer, e.g. 24h or 2d")
	cmd.Flags().StringVar(&offeringID, "offering", "", "buy this extension offering (cbe-…) instead of searching")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "extend without asking")
	return cmd
}

// showBlock prints a block as JSON or as key: value lines.
func (a *app) showBlock(b client.Block) error {
	if a.jsonOutput() {
		return a.printJSON(b)
	}
	return a.printBlock(b)
}
