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
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Run commands on a block's GPUs, and watch them",
		Long: `Run commands on a block's or a plan's GPUs, and watch them. A command that
takes a JOB takes its id (job-…) or its name, when no other job you can see
has that name; --block and --plan take names the same way.

With the server's local runner, a job's processes run in a directory of the
job's own, <jobs-dir>/<job-id> (also their $HOME): name a script by its
absolute path.`,
	}
	cmd.AddCommand(a.jobsRunCmd(), a.jobsListCmd(), a.jobsShowCmd(), a.jobsLogsCmd(), a.jobsStopCmd())
	return cmd
}

func (a *app) jobsRunCmd() *cobra.Command {
	var (
		req client.JobRequest
		env []string
	)
	cmd := &cobra.Command{
		Use:   "run (--block BLOCK | --plan PLAN | --preemptible --type TYPE) [flags] -- COMMAND [ARG...]",
		Short: "Run a command on a block: it starts when the block is active and is stopped 30 minutes before its end",
		Long: `Run a command on a block: it starts when the block is active and is stopped 30 minutes before its end.

With --preemptible it runs on no block, on GPUs nobody needs now (unsold, or
lent by their holder), at the spot price per GPU-hour used, charged until its
last process is gone. It gets SIGTERM a notice (the fleet's backfillNotice, 10
minutes by default) before a block needs its GPUs, or before the team's budget
runs out, is killed by then, and waits to run again. The file named by
$CAPBLOCK_KILL_AT_FILE holds when it will be killed. It is refused beyond the
team's quota, or when the team's budget cannot pay for an hour of it at the
spot price; a waiting one starts only when the budget can.`,
		Example: `  capblock jobs run --block llama-eval --name eval --env SEED=7 --max-restarts 2 -- python3 "$PWD/eval.py"
  capblock jobs run --plan tp-… --name train -- python3 /srv/train.py --epochs 10
  capblock jobs run --preemptible --type l4.1x --instances 2 --name sweep -- python3 /srv/sweep.py`,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case req.Preemptible && (req.BlockID != "" || req.PlanID != ""):
				return usagef("a --preemptible job runs on no block or plan: drop --block and --plan, give --type")
			case req.Preemptible && req.InstanceType == "":
				return usagef("give --type with --preemptible: the instance type of the job's instances ('capblock types' lists them)")
			case !req.Preemptible && (req.InstanceType != "" || req.Zone != "" || req.Team != ""):
				return usagef("--type, --zone and --team are for --preemptible jobs; a job on a block runs on its instances")
			case !req.Preemptible && (req.BlockID == "") == (req.PlanID == ""):
				return usagef("give --block or --plan: the capacity the job runs on (capblock blocks list, capblock plans list), or --preemptible")
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
			if req.Team, err = teamFlag(cmd.Context(), c, req.Team); err != nil {
				return err
			}
			if req.BlockID != "" {
				if req.BlockID, err = blockID(cmd.Context(), c, req.BlockID); err != nil {
					return err
				}
			}
			if req.PlanID != "" {
				if req.PlanID, err = planID(cmd.Context(), c, req.PlanID); err != nil {
					return err
				}
			}
			j, err := c.CreateJob(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.BlockID, "block", "", "the block whose GPUs run the job (its id or name)")
	f.StringVar(&req.PlanID, "plan", "", "the training plan whose segments run the job (its id or name)")
	f.StringVar(&req.Name, "name", "", "a name for the job")
	f.StringArrayVar(&env, "env", nil, "an environment variable NAME=VALUE (repeatable)")
	f.IntVar(&req.InstanceCount, "instances", 0, "instances to run (default: all of the block's)")
	f.IntVar(&req.MaxRestarts, "max-restarts", 0, "restarts after a non-zero exit")
	f.BoolVar(&req.Preemptible, "preemptible", false, "run on backfill (unsold or lent GPUs) at the spot price, preempted with notice when a block needs them")
	f.StringVar(&req.InstanceType, "type", "", "with --preemptible: the instance type of each instance")
	f.StringVar(&req.Zone, "zone", "", "with --preemptible: the zone (default: any)")
	f.StringVar(&req.Team, "team", "", "with --preemptible: the team the job is for and charged to (default: yours)")
	return cmd
}

func (a *app) jobsListCmd() *cobra.Command {
	var filters *listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the team's jobs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			js, err := c.JobsMatching(cmd.Context(), f)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(map[string]any{"jobs": js})
			}
			t := a.newTable("ID", "NAME", "STATE", "BLOCK", "INSTANCES", "RESTARTS", "CREATED (UTC)", "REASON").clipToFit("NAME", "REASON")
			for _, j := range js {
				blk := j.BlockID
				if j.Preemptible {
					blk = "preemptible " + j.InstanceType
				}
				t.row(j.ID, j.Name, j.State, blk, strconv.Itoa(j.InstanceCount), strconv.Itoa(j.Restarts), fmtTime(j.CreatedAt), j.Reason)
			}
			return t.flush()
		},
	}
	filters = addListFlags(cmd, "jobs", jobStates, false)
	return cmd
}

func (a *app) jobsShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show JOB",
		Short: "Show a job",
		Args:  exactlyOne("job id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := jobID(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			j, err := c.Job(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
}

func (a *app) jobsStopCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "stop JOB [--yes]",
		Short: "Stop a job: SIGTERM to its processes, SIGKILL after a grace period",
		Long: `Stop a job: SIGTERM to its processes, SIGKILL after a grace period. It
first says which job and asks for confirmation (--yes does not ask;
without a terminal to answer, --yes is needed).`,
		Args: exactlyOne("job id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.mayAsk(yes, "stop"); err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			id, err := jobID(ctx, c, args[0])
			if err != nil {
				return err
			}
			j, err := c.Job(ctx, id)
			if err != nil {
				return err
			}
			label := j.ID
			if j.Name != "" {
				label = fmt.Sprintf("%s (%s)", j.ID, j.Name)
			}
			what := fmt.Sprintf("stopping job %s: %s, %d instance(s) of %q; its processes get SIGTERM, then SIGKILL after a grace period",
				label, j.State, j.InstanceCount, strings.Join(j.Command, " "))
			if err := a.confirm(yes, what, "Stop it?", "job "+j.ID+" was not stopped"); err != nil {
				return err
			}
			j, err = c.StopJob(ctx, id)
			if err != nil {
				return err
			}
			return a.printJob(j)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "stop without asking")
	return cmd
}

func (a *app) jobsLogsCmd() *cobra.Command {
	var (
		instance int
		follow   bool
		until    string
		every    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs JOB [--instance N] [-f] [--until TEXT]",
		Short: "Print an instance's output; -f follows it until the job ends, --until until it prints TEXT",
		Example: `  capblock jobs logs train -f
  capblock jobs logs train --until 'saved step 20'`,
		Args: exactlyOne("job id or name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id, err := jobID(ctx, c, args[0])
			if err != nil {
				return err
			}
			follow = follow || until != ""
			seen := &textWatch{text: until}
			var (
				offset int64
				ended  string // the job's final state, once seen
			)
			for {
				l, err := c.JobLogs(ctx, id, instance, offset)
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
				switch {
				case seen.add(l.Data) || !follow:
					return nil
				case l.Data != "":
					continue
				case ended != "":
					return seen.missing(args[0], ended)
				}
				j, err := c.Job(ctx, id)
				if err != nil {
					return err
				}
				if j.State == "succeeded" || j.State == "failed" || j.State == "stopped" {
					// Read once more: what it wrote before it ended.
					ended = j.State
					continue
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
	f.StringVar(&until, "until", "", "follow until the output contains this text, then stop (an error if the job ends first)")
	f.DurationVar(&every, "poll", time.Second, "how often -f asks for new output")
	return cmd
}

// textWatch looks for a text in output that arrives in pieces, so that
// the text is found when it spans two of them.
type textWatch struct {
	text string
	tail string // the end of the output so far, shorter than text
}

// add takes the next piece of output and reports whether the text has
// appeared; with no text to look for, never.
func (w *textWatch) add(data string) bool {
	if w.text == "" {
		return false
	}
	s := w.tail + data
	if strings.Contains(s, w.text) {
		return true
	}
	w.tail = s[max(0, len(s)-len(w.text)+1):]
	return false
}

// missing is what a follow returns once the job has ended and its output
// is read to the end: nothing, unless it waited for a text that never came.
func (w *textWatch) missing(job, state string) error {
	if w.text == "" {
		return nil
	}
	return fmt.Errorf("job %s ended (%s) and its output has no %q", job, state, w.text)
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
	if j.Preemptible {
		zone := j.Zone
		if zone == "" {
			zone = "any zone"
		}
		row("preemptible", fmt.Sprintf("%s in %s, on backfill at the spot price", j.InstanceType, zone))
	} else {
		row("block", j.BlockID)
	}
	row("command", strings.Join(j.Command, " "))
	row("instances", strconv.Itoa(j.InstanceCount))
	row("restarts", fmt.Sprintf("%d of %d", j.Restarts, j.MaxRestarts))
	row("created", fmtTime(j.CreatedAt))
	return t.flush()
}
