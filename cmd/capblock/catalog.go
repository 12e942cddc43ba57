package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) typesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "types",
		Short: "List the instance types for sale and their on-demand prices",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			types, err := c.InstanceTypes(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"instanceTypes": types})
			}
			t := newTable(a.stdout, "NAME", "GPU MODEL", "GPUS", "ON-DEMAND/H", "ZONES")
			for _, it := range types {
				t.row(it.Name, it.GPUModel, strconv.Itoa(it.GPUsPerInstance), it.OnDemandPrice.String(), strings.Join(it.Zones, ","))
			}
			return t.flush()
		},
	}
}

func (a *app) nodesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List the fleet's GPU nodes and their health",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			nodes, err := c.Nodes(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"nodes": nodes})
			}
			t := newTable(a.stdout, "NAME", "ZONE", "RACK", "GPU MODEL", "GPUS", "HEALTH", "LABELS")
			for _, n := range nodes {
				t.row(n.Name, n.Zone, n.Rack, n.GPUModel, strconv.Itoa(n.GPUs), n.Health, formatLabels(n.Labels))
			}
			return t.flush()
		},
	}
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// exactlyOne requires one positional argument, named what.
func exactlyOne(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s needs the %s", cmd.CommandPath(), what)
		case len(args) > 1:
			return usagef("%s takes one %s, got %d arguments", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// groupRunE runs a command that only groups subcommands: it shows the
// help, and an unknown subcommand is a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}
