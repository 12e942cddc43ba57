package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

func (a *app) blocksTransferCmd() *cobra.Command {
	var to, price string
	var yes bool
	cmd := &cobra.Command{
		Use:   "transfer BLOCK --to TEAM [--price AMOUNT] [--yes]",
		Short: "Transfer a block, or the rest of it, to another team (where the operator allows)",
		Long: `Transfer a block to another team: the whole block before its start, else
the rest of it from the next whole hour (your block ends there; the other
team gets a new block on the same GPUs for the hours left). The fee stays
yours; with --price the other team is charged that amount and you are
credited it. The receiving team's quota applies, and the operator's policy
(limits.transfers) may allow only admins, or nobody, to transfer.
It first shows what will happen and asks for confirmation (--yes does not
ask; without a terminal to answer, --yes is needed).`,
		Example: `  capblock blocks transfer cb-… --to team-… --yes
  capblock blocks transfer load-test --to team-… --price 500.00`,
		Args: exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return usagef("--to TEAM is required: the team (its id, or its name) that gets the block")
			}
			if err := a.mayAsk(yes, "transfer"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, b, now, err := a.handOnBlock(ctx, args[0], "transferred")
			if err != nil {
				return err
			}
			team := teamIDOf(ctx, c, to)
			terms := "the fee stays yours; the receiving team pays nothing"
			if price != "" {
				terms = fmt.Sprintf("team %s is charged %s %s and you are credited it; the fee stays yours", to, price, b.UpfrontFee.Currency)
			}
			what := fmt.Sprintf("transferring block %s (%s, %d × %s, %s to %s) to team %s: %s; %s",
				blockLabel(b), b.State, b.InstanceCount, b.InstanceType, fmtTime(b.StartTime), fmtZoned(b.EndTime), to, handOnFromPreview(b, now), terms)
			if err := a.confirm(yes, what, "Transfer it?", "block "+b.ID+" was not transferred"); err != nil {
				return err
			}
			h, err := c.TransferBlock(ctx, b.ID, team, price)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(h)
			}
			if h.Received != nil {
				a.note("transferred block %s from %s: team %s holds it as block %s until %s", b.ID, fmtZoned(h.Handover.From), to, h.Received.ID, fmtZoned(h.Received.EndTime))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "the receiving team (its id, or its name)")
	f.StringVar(&price, "price", "", "what the receiving team pays you, e.g. 500.00 (default: nothing)")
	f.BoolVarP(&yes, "yes", "y", false, "transfer without asking")
	return cmd
}

func (a *app) blocksReleaseCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "release BLOCK [--yes]",
		Short: "Release a block, or the rest of it, for resale; credited for what is resold, less the resale fee",
		Long: `Release a block for resale: the whole block before its start, else the rest
of it from the next whole hour (your workloads stop there, as at an end).
Its GPUs are offered again; when another purchase takes them you are
credited your fee's share of the GPU-hours resold, less the operator's
resale fee (limits.resaleFeePercent, 10% unless the operator set another).
Hours nobody buys are not refunded, and a released block gets no
cancellation refund: release instead of cancelling only when the
cancellation policy would refund less.
It first shows what will happen and asks for confirmation (--yes does not
ask; without a terminal to answer, --yes is needed).`,
		Args: exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "release"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, b, now, err := a.handOnBlock(ctx, args[0], "released")
			if err != nil {
				return err
			}
			what := fmt.Sprintf("releasing block %s (%s, %d × %s, %s to %s, fee %s) for resale: %s; you are credited your fee's share "+
				"of what another team buys back, less the resale fee; unsold hours are not refunded, and there is no cancellation refund",
				blockLabel(b), b.State, b.InstanceCount, b.InstanceType, fmtTime(b.StartTime), fmtZoned(b.EndTime), b.UpfrontFee, handOnFromPreview(b, now))
			if err := a.confirm(yes, what, "Release it?", "block "+b.ID+" was not released"); err != nil {
				return err
			}
			h, err := c.ReleaseBlock(ctx, b.ID)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(h)
			}
			a.note("released block %s from %s: %d GPU-hours for resale at a %d%% fee", b.ID, fmtZoned(h.Handover.From), h.Handover.GPUHours, h.Handover.ResaleFeePercent)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "release without asking")
	return cmd
}

// handOnBlock resolves and reads a block to hand on, refusing in one
// line one that is not scheduled or active, and reads the server's time.
func (a *app) handOnBlock(ctx context.Context, arg, verb string) (*client.Client, client.Block, time.Time, error) {
	c, err := a.client()
	if err != nil {
		return nil, client.Block{}, time.Time{}, err
	}
	id, err := blockID(ctx, c, arg)
	if err != nil {
		return nil, client.Block{}, time.Time{}, err
	}
	b, err := c.Block(ctx, id)
	if err != nil {
		return nil, client.Block{}, time.Time{}, err
	}
	if !slices.Contains([]string{"scheduled", "active"}, b.State) {
		return nil, client.Block{}, time.Time{}, fmt.Errorf("block %s is %s: only scheduled or active blocks can be %s", blockLabel(b), b.State, verb)
	}
	now, err := c.Now(ctx)
	if err != nil {
		return nil, client.Block{}, time.Time{}, err
	}
	return c, b, now, nil
}

// handOnFromPreview says which hours go: the whole block before its
// start, else the rest from the next whole hour.
func handOnFromPreview(b client.Block, now time.Time) string {
	if now.Before(b.StartTime) {
		return "it has not started: the whole block goes"
	}
	from := now.Truncate(time.Hour).Add(time.Hour)
	return fmt.Sprintf("it started at %s: you keep it until %s, the rest goes", fmtZoned(b.StartTime), fmtZoned(from))
}

// teamIDOf is the id of the team named arg when the caller can see a
// team of that name, else arg itself (an id).
func teamIDOf(ctx context.Context, c *client.Client, arg string) string {
	for id, name := range teamNames(ctx, c) {
		if name == arg {
			return id
		}
	}
	return arg
}

// gpuHours writes GPU-hours for a table: whole numbers bare, others with
// two decimals.
func gpuHours(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func (a *app) blocksLendCmd() *cobra.Command {
	var on, off bool
	cmd := &cobra.Command{
		Use:   "lend BLOCK (--on | --off)",
		Short: "Lend a block's idle GPUs to backfill (preemptible jobs), credited a share of their spot price; or stop",
		Long: `Lend a block's GPUs to backfill while you run no job on them: preemptible
jobs of any team may run there, and you are credited a share of what they
pay (limits.lendCreditPercent of the spot price, 50% unless the operator
set another); the GPU-hours count as lent in your utilisation. A job of
yours on the block starts once the backfill there is gone: it gets
SIGTERM at once and is gone within the fleet's backfillNotice (10 minutes
unless the operator set another).`,
		Example: `  capblock blocks lend llama-eval --on
  capblock blocks lend cb-… --off`,
		Args: exactlyOne("block id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if on == off {
				return usagef("give --on or --off: whether block %s lends its idle GPUs", args[0])
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := blockID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			b, err := c.SetLending(cmd.Context(), id, on)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(b)
			}
			if b.Lending {
				a.note("block %s lends its idle GPUs to backfill", b.ID)
			} else {
				a.note("block %s no longer lends its GPUs", b.ID)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&on, "on", false, "lend the block's idle GPUs")
	cmd.Flags().BoolVar(&off, "off", false, "stop lending them")
	return cmd
}
