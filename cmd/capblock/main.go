// Command capblock is capblock's one binary: `capblock serve` runs the
// server, and the other commands are a client of its HTTP API (types,
// nodes, offerings, buy, blocks, events, teams, users, tokens, spend,
// audit, admin), with the credentials that `capblock login` stores.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// defaultURL is where `capblock serve` listens by default.
const defaultURL = "http://127.0.0.1:8080"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status: 0 on
// success, 1 when the command failed, 2 for a usage error. Ctrl-C cancels
// the command's context.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdout: stdout, stderr: stderr, getenv: os.Getenv, now: time.Now, configDir: os.UserConfigDir,
		stdin: os.Stdin, interactive: func() bool { return isTerminal(os.Stdin) }}
	return a.execute(ctx, args)
}

// app holds what every command shares: where to write, the environment,
// the clock, where the login is stored, and the global flags.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	configDir      func() (string, error) // os.UserConfigDir
	// stdin answers questions, when interactive says a person is there
	// to answer them (stdin is a terminal); nil interactive means none.
	stdin       io.Reader
	interactive func() bool

	url     string
	token   string
	timeout time.Duration
	output  string
	// format is output parsed (parseOutput).
	format outputFormat
	// noHeaders leaves tables' header lines out.
	noHeaders bool
	// localTime shows times in this machine's zone, local (nil:
	// time.Local), instead of UTC (displayZone).
	localTime bool
	local     *time.Location

	// running is set once a command's own code runs: an error before that
	// came from cobra's parsing and is a usage error.
	running bool
	// creds are the credentials the command's client uses, once it has one.
	creds *credentials
}

// usageErr is a mistake on the command line (exit status 2).
type usageErr struct{ err error }

func (e *usageErr) Error() string { return e.err.Error() }
func (e *usageErr) Unwrap() error { return e.err }

// usageError marks err as a mistake on the command line (exit status 2).
func usageError(err error) error { return &usageErr{err} }

func usagef(format string, args ...any) error {
	return usageError(fmt.Errorf(format, args...))
}

// execute runs args and prints any error as one line on stderr.
func (a *app) execute(ctx context.Context, args []string) int {
	displayZone = time.UTC
	defer func() { displayZone = time.UTC }()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	markRunning(root, &a.running)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var ue *usageErr
	usage := errors.As(err, &ue) || !a.running
	// Cobra's suggestions come on lines of their own; keep them in one line.
	msg := oneLine(strings.Replace(err.Error(), "\n\nDid you mean this?\n", "; did you mean:", 1))
	if errors.Is(err, context.Canceled) {
		msg = "interrupted"
	}
	var problem *client.Problem
	if errors.As(err, &problem) {
		msg = inFlagWords(cmd.CommandPath(), msg)
	}
	switch {
	case usage:
		msg += fmt.Sprintf(" (see '%s --help')", cmd.CommandPath())
	case a.creds != nil && client.ProblemCode(err) == client.CodeUnauthenticated:
		msg = oneLine(a.creds.unauthenticatedMessage(err))
	case client.ProblemCode(err) == client.CodeNotFound && strings.HasPrefix(cmd.CommandPath(), "capblock admin clock"):
		msg = "the server has no simulated clock: start it with 'capblock serve --sim-clock'"
	default:
		msg += hint(cmd, err)
	}
	fmt.Fprintf(a.stderr, "capblock: %s\n", printable(msg))
	if usage {
		return 2
	}
	return 1
}

// markRunning wraps every command's RunE so that *running tells a
// runtime failure from a parse failure.
func markRunning(cmd *cobra.Command, running *bool) {
	if inner := cmd.RunE; inner != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			*running = true
			return inner(c, args)
		}
	}
	for _, sub := range cmd.Commands() {
		markRunning(sub, running)
	}
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "capblock",
		Short: "Buy and use guaranteed windows of GPU capacity",
		Long: `capblock sells capacity blocks: N GPU instances of one type, guaranteed yours
from a start to an end. Search offerings, buy one, and watch your blocks.

The client commands talk to a capblock server at --url (or CAPBLOCK_URL, or
the one "capblock login" stored, default ` + defaultURL + `) with the
API token of --token (or CAPBLOCK_TOKEN, or the stored login's). Start a
server on this machine with "capblock serve", then log in with the first
administrator's token, written beside its database:

  capblock login --url ` + defaultURL + ` --token-file admin.token`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseOutput(a.output)
			if err != nil {
				return err
			}
			a.format = f
			if a.localTime {
				displayZone = cmp.Or(a.local, time.Local)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "server address (default $CAPBLOCK_URL, the login's, or "+defaultURL+")")
	pf.StringVar(&a.token, "token", "", "API token (default $CAPBLOCK_TOKEN or the login's)")
	pf.DurationVar(&a.timeout, "timeout", client.DefaultTimeout, "how long to wait for each answer")
	pf.StringVarP(&a.output, "output", "o", "table", "output format: table (fits 120 columns), wide (every column, e.g. offering ids), json, yaml, or jsonpath=TEMPLATE (kubectl's, over what json prints: -o jsonpath='{.blocks[*].id}')")
	pf.BoolVar(&a.noHeaders, "no-headers", false, "print tables without their header line")
	pf.BoolVar(&a.localTime, "local-time", false, "show times in this machine's time zone instead of UTC (JSON stays UTC)")

	root.AddCommand(
		newServeCmd(),
		a.typesCmd(),
		a.nodesCmd(),
		a.offeringsCmd(),
		a.buyCmd(),
		a.blocksCmd(),
		a.plansCmd(),
		a.seriesCmd(),
		a.ordersCmd(),
		a.eventsCmd(),
		a.webhooksCmd(),
		a.loginCmd(),
		a.logoutCmd(),
		a.teamsCmd(),
		a.usersCmd(),
		a.tokensCmd(),
		a.accessKeysCmd(),
		a.spendCmd(),
		a.auditCmd(),
		a.adminCmd(),
		a.migrateCmd(),
		a.jobsCmd(),
		a.versionCmd(),
	)
	return root
}

// client returns an API client with the credentials of the flags, the
// environment or the stored login (see resolveCredentials).
func (a *app) client() (*client.Client, error) {
	cr, err := a.resolveCredentials()
	if err != nil {
		return nil, err
	}
	c, err := a.newClient(cr.url, cr.token)
	if err != nil {
		return nil, err
	}
	a.creds = &cr
	return c, nil
}

// newClient returns an API client of the server at url that sends token.
func (a *app) newClient(url, token string) (*client.Client, error) {
	c, err := client.New(url, client.WithToken(token), client.WithTimeout(a.timeout))
	if err != nil {
		return nil, usageError(fmt.Errorf("--url: %w", err))
	}
	return c, nil
}

// hint adds how to fix a failure that the server explained.
func hint(cmd *cobra.Command, err error) string {
	var bought *boughtError
	if errors.As(err, &bought) {
		return "" // it says what to do
	}
	switch client.ProblemCode(err) {
	case client.CodeBudgetExceeded:
		return "; an admin can change the team's budget with 'capblock teams budget'"
	case client.CodeQuotaExceeded:
		return "; an admin can change the team's quota with 'capblock teams quota'"
	case client.CodeRateLimited:
		return "; the server limits each token's requests: wait a moment and try again"
	case client.CodeOfferingInvalid:
		return "; copy the whole offering id from 'capblock offerings'"
	case client.CodeNoCapacity:
		return "; search again for other times, zones or counts"
	case client.CodeOfferingExpired:
		// The server may have said to search again: then the hint only
		// names the command to search with, so that it is said once.
		again := "; search again for a fresh quote"
		if strings.HasSuffix(err.Error(), "search again for a fresh quote") {
			again = ""
		}
		switch path := cmd.CommandPath(); {
		case strings.HasPrefix(path, "capblock blocks extend"):
			if again == "" {
				return " with 'capblock blocks extension-offerings', or extend with --duration"
			}
			return "; search again with 'capblock blocks extension-offerings', or extend with --duration"
		case strings.HasPrefix(path, "capblock plans"):
			return again + " with 'capblock plans offerings'"
		default:
			return again + " with 'capblock offerings'"
		}
	case client.CodeOfferingUsed:
		if strings.Contains(err.Error(), "search again") {
			return "" // the server said what to do; saying it again is noise
		}
		switch path := cmd.CommandPath(); {
		case strings.HasPrefix(path, "capblock blocks extend"):
			return "; search again with 'capblock blocks extension-offerings', or extend with --duration"
		case strings.HasPrefix(path, "capblock plans"):
			return "; search again for a new quote with 'capblock plans offerings', or repeat the first purchase with its --client-token"
		default:
			return "; search again for a new quote with 'capblock offerings', or repeat the first purchase with its --client-token"
		}
	case client.CodeIdempotencyMismatch:
		return "; that --client-token was used for another purchase: pass a new one"
	}
	return ""
}

// oneLine folds whitespace so that a message prints as one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
