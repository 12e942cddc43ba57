package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"capblock/internal/client"
	"capblock/internal/humantime"
)

// dateFlag is a date flag to parse, and where its value goes.
type dateFlag struct {
	name, value string
	into        *time.Time
}

// parseDates parses date flags; an empty one stays the zero time. The
// relative ones ("now", "+5d", "tomorrow") are read from the server's
// clock, which is the simulated one on a server run with --sim-clock and
// may disagree with this machine's: the server is asked once, and only
// when a flag is relative.
func (a *app) parseDates(ctx context.Context, c *client.Client, flags ...dateFlag) error {
	var now time.Time
	for _, f := range flags {
		if f.value == "" {
			continue
		}
		if _, err := humantime.ParseTime(f.value, time.Time{}); err != nil {
			return usageError(fmt.Errorf("%s: %w", f.name, err))
		}
		if now.IsZero() && relative(f.value) {
			var err error
			if now, err = c.Now(ctx); err != nil {
				return err
			}
		}
	}
	for _, f := range flags {
		if f.value != "" {
			*f.into, _ = humantime.ParseTime(f.value, now) // checked above
		}
	}
	return nil
}

// relative reports whether a date depends on the time it is read at: it
// reads differently at two different times.
func relative(s string) bool {
	a, _ := humantime.ParseTime(s, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	b, _ := humantime.ParseTime(s, time.Date(2002, 2, 2, 2, 2, 2, 0, time.UTC))
	return !a.Equal(b)
}

// namedThing is a block, plan or job as a name is looked up among them.
type namedThing struct{ id, name, state string }

// thingKind says how to look up a kind of thing by name.
type thingKind struct {
	noun   string // "block"
	prefix string // its ids' prefix, "cb-"
	list   string // the command that lists them
}

var (
	blockThing = thingKind{noun: "block", prefix: "cb-", list: "capblock blocks list"}
	planThing  = thingKind{noun: "plan", prefix: "tp-", list: "capblock plans list"}
	jobThing   = thingKind{noun: "job", prefix: "job-", list: "capblock jobs list"}
	userThing  = thingKind{noun: "user", prefix: "usr-", list: "capblock users list"}
	teamThing  = thingKind{noun: "team", prefix: "team-", list: "capblock teams list"}
)

// resolve returns the id that arg stands for: arg itself when it has the
// kind's id prefix, else the id of the one thing of that kind named arg
// among those the caller sees (its team's; every team's for an admin).
// A name that no thing has, or that several have, is an error that lists
// what to give instead.
func resolve(ctx context.Context, kind thingKind, arg string, list func(context.Context) ([]namedThing, error)) (string, error) {
	if strings.HasPrefix(arg, kind.prefix) {
		return arg, nil
	}
	things, err := list(ctx)
	if err != nil {
		return "", err
	}
	var found []namedThing
	for _, t := range things {
		if t.name == arg {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no %s is named %q (an id starts with %s; '%s' lists ids and names)", kind.noun, arg, kind.prefix, kind.list)
	case 1:
		return found[0].id, nil
	}
	ids := make([]string, len(found))
	for i, t := range found {
		ids[i] = fmt.Sprintf("%s (%s)", t.id, t.state)
	}
	return "", fmt.Errorf("%d %ss are named %q: give the id of one: %s", len(found), kind.noun, arg, strings.Join(ids, ", "))
}

// blockID returns the id of the block that arg names (resolve).
func blockID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, blockThing, arg, blockThings(c))
}

// blockThings lists the caller's blocks as names are looked up among them.
func blockThings(c *client.Client) func(context.Context) ([]namedThing, error) {
	return func(ctx context.Context) ([]namedThing, error) {
		blocks, err := c.Blocks(ctx, "")
		things := make([]namedThing, len(blocks))
		for i, b := range blocks {
			things[i] = namedThing{b.ID, b.Name, b.State}
		}
		return things, err
	}
}

// planID returns the id of the plan that arg names (resolve).
func planID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, planThing, arg, planThings(c))
}

// planThings lists the caller's plans as names are looked up among them.
func planThings(c *client.Client) func(context.Context) ([]namedThing, error) {
	return func(ctx context.Context) ([]namedThing, error) {
		plans, err := c.Plans(ctx)
		things := make([]namedThing, len(plans))
		for i, p := range plans {
			things[i] = namedThing{p.ID, p.Name, p.State}
		}
		return things, err
	}
}

// jobID returns the id of the job that arg names (resolve).
func jobID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, jobThing, arg, jobThings(c))
}

// jobThings lists the caller's jobs as names are looked up among them.
func jobThings(c *client.Client) func(context.Context) ([]namedThing, error) {
	return func(ctx context.Context) ([]namedThing, error) {
		jobs, err := c.Jobs(ctx)
		things := make([]namedThing, len(jobs))
		for i, j := range jobs {
			things[i] = namedThing{j.ID, j.Name, j.State}
		}
		return things, err
	}
}

// userID returns the id of the user that arg names (resolve).
func userID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, userThing, arg, func(ctx context.Context) ([]namedThing, error) {
		users, err := c.Users(ctx)
		things := make([]namedThing, len(users))
		for i, u := range users {
			things[i] = namedThing{u.ID, u.Name, u.Role}
		}
		return things, err
	})
}

// teamID returns the id of the team that arg names (resolve).
func teamID(ctx context.Context, c *client.Client, arg string) (string, error) {
	return resolve(ctx, teamThing, arg, func(ctx context.Context) ([]namedThing, error) {
		teams, err := c.Teams(ctx)
		things := make([]namedThing, len(teams))
		for i, t := range teams {
			things[i] = namedThing{t.ID, t.Name, "team"}
		}
		return things, err
	})
}

// teamFlag returns the id of the team a --team flag names, its id or its
// name; an empty flag stays empty (the caller's own team).
func teamFlag(ctx context.Context, c *client.Client, arg string) (string, error) {
	if arg == "" {
		return "", nil
	}
	id, err := teamID(ctx, c, arg)
	if err != nil {
		return "", fmt.Errorf("--team: %w", err)
	}
	return id, nil
}

// subjectKinds are the kinds of thing an event is about, and how to list
// each kind by name.
func subjectKinds(c *client.Client) []struct {
	kind thingKind
	list func(context.Context) ([]namedThing, error)
} {
	return []struct {
		kind thingKind
		list func(context.Context) ([]namedThing, error)
	}{
		{blockThing, blockThings(c)},
		{planThing, planThings(c)},
		{jobThing, jobThings(c)},
		{seriesThing, seriesThings(c)},
		{orderThing, orderThings(c)},
	}
}

// subjectID returns the id of the block, plan, job, series or order that
// arg names: arg itself when it has one of their id prefixes, else the
// id of the one of them named arg. Like resolve, a name that none has,
// or that several have, is an error that says what to give instead.
func subjectID(ctx context.Context, c *client.Client, arg string) (string, error) {
	kinds := subjectKinds(c)
	for _, k := range kinds {
		if strings.HasPrefix(arg, k.kind.prefix) {
			return arg, nil
		}
	}
	var found []string
	id := ""
	for _, k := range kinds {
		things, err := k.list(ctx)
		if err != nil {
			return "", err
		}
		for _, t := range things {
			if t.name == arg {
				id = t.id
				found = append(found, fmt.Sprintf("%s %s (%s)", k.kind.noun, t.id, t.state))
			}
		}
	}
	switch len(found) {
	case 0:
		prefixes := make([]string, len(kinds))
		for i, k := range kinds {
			prefixes[i] = k.kind.prefix + "…"
		}
		return "", fmt.Errorf("no block, plan, job, series or order is named %q (an id starts with %s)", arg, strings.Join(prefixes, ", "))
	case 1:
		return id, nil
	}
	return "", fmt.Errorf("%d things are named %q: give the id of one: %s", len(found), arg, strings.Join(found, ", "))
}
