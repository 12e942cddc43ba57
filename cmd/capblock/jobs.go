package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// jobsCmd is `capblock jobs run|list|show|logs|stop`.
func (a *app) jobsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Run commands on a block's GPUs, and watch them"}
	cmd.AddCommand(a.jobsRunCmd(), a.jobsListCmd(), a.jobsShowCmd(), a.jobsLogsCmd(), a.jobsStopCmd())
	return cmd
}

func (a *app) jobsRunCmd() *cobra.Command {
	var (
		req client.JobRequest
		env []string
	)
	cmd := &cobra.Command{
		Use:     "run --block BLOCK_ID [flags] -- COMMAND [ARG...]",
		Short:   "Run a command on a block: it starts when the block is active and is stopped 30 minutes before its end",
		Example: `  capblock jobs run --block cb-… --env SEED=7 --max-restarts 2 -- python train.py --epochs 10`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (req.BlockID == "") == (req.PlanID == "") {
				return usagef("give --block or --plan: the capacity the job runs on (capblock blocks list, capblock plans list)")
			}
			if len(args) == 0 {
				return usagef("the command is missing: put it after --, e.g. capblock jobs run --block cb-… -- python train.py")
			}
			req.Command = args
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--env %q: want NAME=VALUE", kv)
				}
				if req.Env == nil {
					req.Env = map[string]string{}
				}
				req.Env[k] = v
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.CreateJob(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.BlockID, "block", "", "the block whose GPUs run the job")
	f.StringVar(&req.PlanID, "plan", "", "the training plan whose segments run the job")
	f.StringVar(&req.Name, "name", "", "a name for the job")
	f.StringArrayVar(&env, "env", nil, "an environment variable NAME=VALUE (repeatable)")
	f.IntVar(&req.InstanceCount, "instances", 0, "instances to run (default: all of the block's)")
	f.IntVar(&req.MaxRestarts, "max-restarts", 0, "restarts after a non-zero exit")
	return cmd
}

func (a *app) jobsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the team's jobs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			js, err := c.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"jobs": js})
			}
			t := newTable(a.stdout, "ID", "NAME", "STATE", "BLOCK", "INSTANCES", "RESTARTS", "CREATED (UTC)", "REASON")
			for _, j := range js {
				t.row(j.ID, j.Name, j.State, j.BlockID, strconv.Itoa(j.InstanceCount), strconv.Itoa(j.Restarts), fmtTime(j.CreatedAt), j.Reason)
			}
			return t.flush()
		},
	}
}

func (a *app) jobsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show JOB_ID",
		Short: "Show a job",
		Args:  exactlyOne("job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
}

func (a *app) jobsStopCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stop JOB_ID",
		Short: "Stop a job: SIGTERM to its processes, SIGKILL after a grace period",
		Args:  exactlyOne("job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			j, err := c.StopJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
}

func (a *app) jobsLogsCmd() *cobra.Command {
	var (
		instance int
		follow   bool
		every    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs JOB_ID [--instance N] [-f]",
		Short: "Print an instance's output; -f follows it until the job ends",
		Args:  exactlyOne("job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var offset int64
			for {
				l, err := c.JobLogs(ctx, args[0], instance, offset)
				if err != nil {
					return err
				}
				// The output is printed as it is, not escaped like
				// everything else the CLI prints from the server: it is
				// what the team's own job wrote, shown only to that team
				// and to operators, like the output of a program run
				// locally, and escaping would garble what programs write
				// on purpose (progress bars redrawn with \r, colours, any
				// encoding). Pipe it through 'cat -v' or 'less' to see
				// control characters.
				io.WriteString(a.stdout, l.Data)
				offset = l.Next
				if l.Data != "" || !follow {
					if !follow {
						return nil
					}
					continue
				}
				j, err := c.Job(ctx, args[0])
				if err != nil {
					return err
				}
				if j.State == "succeeded" || j.State == "failed" || j.State == "stopped" {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil // Ctrl-C ends a follow cleanly
				case <-time.After(every):
				}
			}
		},
	}
	f := cmd.Flags()
	f.IntVar(&instance, "instance", 0, "the instance (rank) whose output to print")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new output until the job ends")
	f.DurationVar(&every, "poll", time.Second, "how often -f asks for new output")
	return cmd
}

func (a *app) printJob(j client.Job) error {
	if a.jsonOutput() {
		return a.printJSON(j)
	}
	t := &table{w: tabwriter.NewWriter(a.stdout, 0, 8, 1, ' ', 0)}
	row := func(k, v string) { t.row(k+":", v) }
	row("id", j.ID)
	row("name", j.Name)
	row("state", j.State)
	if j.Reason != "" {
		row("reason", j.Reason)
	}
	if j.PlanID != "" {
		row("plan", j.PlanID)
	}
	row("block", j.BlockID)
	row("command", strings.Join(j.Command, " "))
	row("instances", strconv.Itoa(j.InstanceCount))
	row("restarts", fmt.Sprintf("%d of %d", j.Restarts, j.MaxRestarts))
	row("created", fmtTime(j.CreatedAt))
	return t.flush()
}
