package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"capblock/internal/awsapi"
	"capblock/internal/client"
	"capblock/internal/core"
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
			t := a.newTable("NAME", "GPU MODEL", "GPUS", "ON-DEMAND/H", "ZONES").clipToFit("ZONES")
			for _, it := range types {
				t.row(it.Name, it.GPUModel, strconv.Itoa(it.GPUsPerInstance), it.OnDemandPrice.String(), strings.Join(it.Zones, ","))
			}
			return t.flush()
		},
	}
}

func (a *app) nodesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List the fleet's GPU nodes and their health; fail or recover one (admin)",
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
			t := a.newTable("NAME", "ZONE", "RACK", "GPU MODEL", "GPUS", "HEALTH", "LABELS").clipToFit("LABELS")
			for _, n := range nodes {
				t.row(n.Name, n.Zone, n.Rack, n.GPUModel, strconv.Itoa(n.GPUs), healthCell(n.Health, n.HealthReason, n.HealthSource), formatLabels(n.Labels))
			}
			return t.flush()
		},
	}
	var reason string
	fail := &cobra.Command{
		Use:   "fail NODE [--reason TEXT]",
		Short: "Mark a node failed (admin): its blocks move to replacement GPUs, or are degraded when none is free",
		Long: `Mark a node failed. Nothing new is placed on it; each block on it gets
replacement GPUs of the same pool, or is degraded (short of GPUs) when none is
free, and the jobs of a moved active block restart on the new GPUs from their
checkpoints. Only "capblock nodes recover" ends an administrator's fail: the
engine's word that the node is healthy does not.`,
		Example: `  capblock nodes fail h100-07 --reason "GPU 3: XID 79"`,
		Args:    exactlyOne("node's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.FailNode(cmd.Context(), args[0], reason)
			if err != nil {
				return err
			}
			return a.printNodeReport(r)
		},
	}
	fail.Flags().StringVar(&reason, "reason", "", "why, for operators to read (at most 500 characters)")
	recover := &cobra.Command{
		Use:     "recover NODE",
		Short:   "Mark a node healthy again (admin): degraded blocks with GPUs on it are whole again",
		Example: `  capblock nodes recover h100-07`,
		Args:    exactlyOne("node's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.RecoverNode(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printNodeReport(r)
		},
	}
	cmd.AddCommand(fail, recover)
	return cmd
}

// healthCell is a node's health with, when unhealthy, why and who said
// so: "unhealthy (GPU 3: XID 79; admin)".
func healthCell(health, reason, source string) string {
	var why []string
	for _, s := range []string{reason, source} {
		if s != "" {
			why = append(why, s)
		}
	}
	if health != "unhealthy" || len(why) == 0 {
		return health
	}
	return health + " (" + strings.Join(why, "; ") + ")"
}

// printNodeReport prints what a fail or recover did, one line each for
// the node and its blocks.
func (a *app) printNodeReport(r client.NodeReport) error {
	if a.jsonOutput() {
		return a.printJSON(r)
	}
	lines := []string{fmt.Sprintf("node %s is %s", r.Node, healthCell(r.Health, r.HealthReason, r.HealthSource))}
	for _, group := range []struct {
		what   string
		blocks []string
	}{{"moved to replacement GPUs", r.Replaced}, {"degraded, no replacement free", r.Degraded}, {"whole again", r.Recovered}} {
		if len(group.blocks) > 0 {
			lines = append(lines, fmt.Sprintf("%d block(s) %s: %s", len(group.blocks), group.what, strings.Join(group.blocks, ", ")))
		}
	}
	for _, l := range lines {
		a.printLine("%s", l)
	}
	return nil
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
		case args[0] == "":
			return usagef("%s needs the %s, got an empty argument", cmd.CommandPath(), what)
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

// capblockTypes maps the --type values that are AWS names (p5.48xlarge,
// ml.p5.48xlarge) to capblock's types, as the /aws fronts do: by the
// fleet's awsNames, through awsapi.CapblockType. A name the fleet does
// not know stays as given, for the server to say it is unknown.
func capblockTypes(ctx context.Context, c *client.Client, names []string) ([]string, error) {
	if len(names) == 0 {
		return names, nil
	}
	types, err := c.InstanceTypes(ctx)
	if err != nil {
		return nil, err
	}
	f := core.Fleet{Types: make([]core.InstanceType, len(types))}
	for i, t := range types {
		f.Types[i] = core.InstanceType{Name: t.Name, AWSNames: t.AWSNames}
	}
	mapped := make([]string, len(names))
	for i, n := range names {
		mapped[i] = n
		if t, ok := awsapi.CapblockType(f, n); ok {
			mapped[i] = t
		}
	}
	return mapped, nil
}
