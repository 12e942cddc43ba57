package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"capblock/internal/client"
)

// The states each list command's --state accepts (API.md).
var (
	blockStates  = []string{"payment-pending", "scheduled", "active", "expired", "payment-failed", "cancelled", "failed"}
	planStates   = []string{"pending", "scheduled", "active", "expired", "failed", "cancelled"}
	jobStates    = []string{"pending", "running", "interrupted", "succeeded", "failed", "stopped"}
	seriesStates = []string{"scheduled", "active", "ended", "cancelled"}
	orderStates  = []string{"open", "notified", "bought", "expired", "cancelled"}
)

// listFlags are a list command's filters: --state, --team and, for
// things that have tags, --tag. The server applies them (query
// parameters of the list operation), to what the caller may see.
type listFlags struct {
	valid  []string // the states a thing can be in
	states []string // --state
	team   string   // --team, an id or a name
	tags   []string // --tag
}

// addListFlags declares the filters of a list of things (plural: "blocks"),
// which can be in the valid states; with tags, --tag too.
func addListFlags(cmd *cobra.Command, plural string, valid []string, tags bool) *listFlags {
	l := &listFlags{valid: valid}
	f := cmd.Flags()
	f.StringSliceVar(&l.states, "state", nil, fmt.Sprintf("only %s in this state: %s (repeat it or separate with commas: any of them)", plural, strings.Join(valid, ", ")))
	f.StringVar(&l.team, "team", "", fmt.Sprintf("only this team's %s, its name or id (an admin sees every team's, a member its own)", plural))
	if tags {
		f.StringArrayVar(&l.tags, "tag", nil, fmt.Sprintf("only %s with this tag, KEY=VALUE (repeat it: all must match)", plural))
	}
	return l
}

// check reports a bad --state or --tag, before any request.
func (l *listFlags) check() error {
	for _, s := range l.states {
		if !slices.Contains(l.valid, s) {
			return usagef("--state %q: choose one of %v", s, l.valid)
		}
	}
	if _, err := parseTags(l.tags); err != nil {
		return err
	}
	return nil
}

// filter checks the flags and resolves --team to an id (a team name
// resolves among the teams the caller can list, as every --team does).
func (l *listFlags) filter(ctx context.Context, c *client.Client) (client.ListFilter, error) {
	team, err := teamFlag(ctx, c, l.team)
	if err != nil {
		return client.ListFilter{}, err
	}
	return client.ListFilter{States: l.states, Team: team}, nil
}

// set reports whether any filter is given.
func (l *listFlags) set() bool { return len(l.states) > 0 || l.team != "" || len(l.tags) > 0 }

// says is what the filters keep, for a message that none matched:
// " in state active or scheduled, of team research, tagged env=prod".
func (l *listFlags) says() string {
	var parts []string
	if len(l.states) > 0 {
		parts = append(parts, "in state "+strings.Join(l.states, " or "))
	}
	if l.team != "" {
		parts = append(parts, "of team "+l.team)
	}
	if len(l.tags) > 0 {
		parts = append(parts, "tagged "+strings.Join(l.tags, " and "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, ", ")
}

// none tells that no thing matched the filters, or, without filters,
// that there is none and what to do (hint).
func (a *app) none(l *listFlags, plural, hint string) {
	if l.set() {
		a.note("no %s%s", plural, l.says())
		return
	}
	a.note("no %s; %s", plural, hint)
}
