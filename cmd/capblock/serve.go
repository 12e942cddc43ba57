package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newServeCmd is replaced by the real server wiring.
func newServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the capblock server",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("serve is not wired yet")
		},
	}
}
