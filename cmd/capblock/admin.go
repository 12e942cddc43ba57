package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
	"capblock/internal/humantime"
)

func (a *app) adminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operator commands",
		RunE:  groupRunE,
	}
	cmd.AddCommand(a.adminClockCmd())
	return cmd
}

func (a *app) adminClockCmd() *cobra.Command {
	var advance, now string
	cmd := &cobra.Command{
		Use:   "clock [--advance D | --now TIME]",
		Short: "Print, advance or set the simulated clock of a server run with --sim-clock",
		Example: `  capblock admin clock
  capblock admin clock --advance 6h
  capblock admin clock --now 2026-12-01T00:00:00Z`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if advance != "" && now != "" {
				return usagef("give --advance or --now, not both")
			}
			var (
				d time.Duration
				t time.Time
			)
			if advance != "" {
				var err error
				if d, err = humantime.ParseDuration(advance); err != nil {
					return usageError(fmt.Errorf("--advance: %w", err))
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := a.parseDates(cmd.Context(), c, dateFlag{"--now", now, &t}); err != nil {
				return err
			}
			var clk client.Clock
			switch {
			case advance != "":
				clk, err = c.AdvanceClock(cmd.Context(), d)
			case now != "":
				clk, err = c.SetClock(cmd.Context(), t)
			default:
				clk, err = c.Clock(cmd.Context())
			}
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(clk)
			}
			_, err = cmd.OutOrStdout().Write([]byte(clk.Now.UTC().Format(time.RFC3339) + "\n"))
			return err
		},
	}
	cmd.Flags().StringVar(&advance, "advance", "", "move the clock forward, e.g. 6h or 1d")
	cmd.Flags().StringVar(&now, "now", "", "set the clock, e.g. 2026-12-01T00:00:00Z (or +6h, from the server's clock)")
	return cmd
}
