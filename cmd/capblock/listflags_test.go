package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestListFilters drives --state, --team and --tag of the list commands
// against a real server: two teams' blocks, a plan, a series and an
// order, listed by an admin and by a member of one team, who never sees
// the other team's, whatever it filters by.
func TestListFilters(t *testing.T) {
	_, url, token := realServer(t, time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC))
	as := func(token string, args ...string) result {
		t.Helper()
		return runApp(t.Context(), map[string]string{"CAPBLOCK_URL": url, "CAPBLOCK_TOKEN": token}, args...)
	}
	run := func(args ...string) result {
		t.Helper()
		r := as(token, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}

	// 1. Two teams, a member of research, and their things.
	run("teams", "create", "research")
	run("teams", "create", "vision")
	run("users", "create", "ada", "--team", "research", "--role", "member")
	var member struct{ Token string }
	if err := json.Unmarshal([]byte(run("-o", "json", "tokens", "create", "--user", "ada").stdout), &member); err != nil {
		t.Fatal(err)
	}
	buy := func(team, name string, tags ...string) {
		t.Helper()
		run("offerings", "--type", "l4.1x", "--count", "1", "--duration", "8h", "--start-after", "2027-03-16", "--team", team)
		args := []string{"buy", "1", "--name", name, "--team", team}
		for _, tag := range tags {
			args = append(args, "--tag", tag)
		}
		run(args...)
	}
	buy("research", "r-prod-ada", "env=prod", "owner=ada")
	buy("research", "r-dev", "env=dev", "owner=ada")
	buy("vision", "v-prod", "env=prod")
	buy("research", "r-gone")
	run("blocks", "cancel", "r-gone", "--yes")
	run("plans", "offerings", "--type", "l4.1x", "--count", "1", "--duration", "16h", "--start-after", "2027-04-10")
	run("plans", "buy", "1", "--name", "r-plan", "--team", "research")
	run("series", "search", "--type", "l4.1x", "--count", "1", "--days", "weekdays", "--start", "09:00", "--end", "17:00",
		"--tz", "Europe/Madrid", "--from", "2027-03-22", "--weeks", "1")
	run("series", "buy", "1", "--name", "v-series", "--team", "vision")
	run("orders", "create", "--type", "l4.1x", "--count", "1", "--duration", "8h", "--start-after", "2027-05-01",
		"--end-before", "2027-05-03", "--mode", "buy", "--max-fee", "0.01", "--name", "r-order", "--team", "research")
	var vision struct{ Teams []struct{ ID, Name string } }
	if err := json.Unmarshal([]byte(run("-o", "json", "teams", "list").stdout), &vision); err != nil {
		t.Fatal(err)
	}
	visionID := ""
	for _, tm := range vision.Teams {
		if tm.Name == "vision" {
			visionID = tm.ID
		}
	}

	// 2. What each filter keeps, by name.
	names := func(tok string, args ...string) []string {
		t.Helper()
		r := as(tok, append([]string{"-o", `jsonpath={range .*[*]}{.name}{"\n"}{end}`}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if r.stdout == "" {
			return nil
		}
		got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		slices.Sort(got)
		return got
	}
	tests := map[string]struct {
		token string
		args  []string
		want  []string
	}{
		"blocks of a team, by name": {args: []string{"blocks", "list", "--team", "research"}, want: []string{"r-dev", "r-gone", "r-plan (segment 1 of 1)", "r-prod-ada"}},
		"blocks of a team, by id": {args: []string{"blocks", "list", "--team", visionID},
			want: []string{"v-prod", "v-series (1 of 5)", "v-series (2 of 5)", "v-series (3 of 5)", "v-series (4 of 5)", "v-series (5 of 5)"}},
		"blocks in a state":               {args: []string{"blocks", "list", "--state", "cancelled"}, want: []string{"r-gone"}},
		"blocks in either state, commas":  {args: []string{"blocks", "list", "--state", "cancelled,expired"}, want: []string{"r-gone"}},
		"blocks with a tag":               {args: []string{"blocks", "list", "--tag", "env=prod"}, want: []string{"r-prod-ada", "v-prod"}},
		"blocks with every tag":           {args: []string{"blocks", "list", "--tag", "env=prod", "--tag", "owner=ada"}, want: []string{"r-prod-ada"}},
		"blocks of a team with a tag":     {args: []string{"blocks", "list", "--team", "vision", "--tag", "env=prod"}, want: []string{"v-prod"}},
		"blocks, all filters":             {args: []string{"blocks", "list", "--team", "research", "--state", "scheduled", "--state", "active", "--tag", "owner=ada"}, want: []string{"r-dev", "r-prod-ada"}},
		"plans in a state":                {args: []string{"plans", "list", "--state", "scheduled"}, want: []string{"r-plan"}},
		"plans in another state":          {args: []string{"plans", "list", "--state", "expired,failed"}, want: nil},
		"plans of another team":           {args: []string{"plans", "list", "--team", "vision"}, want: nil},
		"series of a team":                {args: []string{"series", "list", "--team", "vision", "--state", "scheduled"}, want: []string{"v-series"}},
		"series of another team":          {args: []string{"series", "list", "--team", "research"}, want: nil},
		"orders in a state":               {args: []string{"orders", "list", "--state", "open"}, want: []string{"r-order"}},
		"orders in another state":         {args: []string{"orders", "list", "--state", "bought", "--team", "research"}, want: nil},
		"a member: its team's blocks":     {token: member.Token, args: []string{"blocks", "list", "--tag", "env=prod"}, want: []string{"r-prod-ada"}},
		"a member: another team's, none":  {token: member.Token, args: []string{"blocks", "list", "--team", visionID}, want: nil},
		"a member: another team's tag":    {token: member.Token, args: []string{"blocks", "list", "--team", visionID, "--tag", "env=prod"}, want: nil},
		"a member: another team's series": {token: member.Token, args: []string{"series", "list", "--team", visionID}, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tok := tc.token
			if tok == "" {
				tok = token
			}
			if diff := cmp.Diff(tc.want, names(tok, tc.args...)); diff != "" {
				t.Errorf("%v (-want +got):\n%s", tc.args, diff)
			}
		})
	}

	// 3. A table says when nothing matched; bad values are one line
	// each, before any request where they can be.
	for args, want := range map[string]result{
		"blocks list --state expired --team research": {stderr: "no blocks in state expired, of team research\n"},
		"blocks list --tag env=staging":               {stderr: "no blocks tagged env=staging\n"},
		"blocks list --state running": {code: 2, stderr: "capblock: --state \"running\": choose one of " +
			"[payment-pending scheduled active expired payment-failed cancelled failed] (see 'capblock blocks list --help')\n"},
		"plans list --state ended": {code: 2, stderr: "capblock: --state \"ended\": choose one of " +
			"[pending scheduled active expired failed cancelled] (see 'capblock plans list --help')\n"},
		"series list --state active,open": {code: 2, stderr: "capblock: --state \"open\": choose one of " +
			"[scheduled active ended cancelled] (see 'capblock series list --help')\n"},
		"orders list --state scheduled": {code: 2, stderr: "capblock: --state \"scheduled\": choose one of " +
			"[open notified bought expired cancelled] (see 'capblock orders list --help')\n"},
		"blocks list --tag env":   {code: 2, stderr: "capblock: --tag \"env\": write it as KEY=VALUE (see 'capblock blocks list --help')\n"},
		"blocks list --tag =prod": {code: 2, stderr: "capblock: --tag \"=prod\": write it as KEY=VALUE (see 'capblock blocks list --help')\n"},
		"orders list --team nobody": {code: 1, stderr: "capblock: --team: no team is named \"nobody\" " +
			"(an id starts with team-; 'capblock teams list' lists ids and names)\n"},
	} {
		if got := as(token, strings.Fields(args)...); !cmp.Equal(want, got, cmp.AllowUnexported(result{})) {
			t.Errorf("%s (-want +got):\n%s", args, cmp.Diff(want, got, cmp.AllowUnexported(result{})))
		}
	}
}

// TestJobsListFilters checks the query that jobs list sends for its
// filters (the server that runs jobs is the e2e tests'), and its bad
// values.
func TestJobsListFilters(t *testing.T) {
	api := newFakeAPI(t)
	checkRun(t, api.URL, api.seen, []string{"jobs", "list", "--state", "running,failed", "--state", "pending", "--team", "team-1"},
		result{stdout: "*"},
		[]string{"GET /v1/jobs?state=running&state=failed&state=pending&team=team-1"})
	checkRun(t, api.URL, nil, []string{"jobs", "list", "--state", "scheduled"},
		result{code: 2, stderr: "capblock: --state \"scheduled\": choose one of [pending running interrupted succeeded failed stopped] (see 'capblock jobs list --help')\n"}, nil)
	checkRun(t, api.URL, nil, []string{"jobs", "list", "--tag", "env=prod"},
		result{code: 2, stderr: "capblock: unknown flag: --tag (see 'capblock jobs list --help')\n"}, nil)
}
