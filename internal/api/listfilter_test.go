package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/core"
)

// jobsFake adds the jobs list to the fake service: the jobs of every
// team, of which ListJobs answers the scope's, as the service does.
type jobsFake struct {
	*fakeService
	jobs []core.Job
}

func (f *jobsFake) ListJobs(_ context.Context, scope string) ([]core.Job, error) {
	var out []core.Job
	for _, j := range f.jobs {
		if scope == "" || j.Team == scope {
			out = append(out, j)
		}
	}
	return out, nil
}

// ids are the ids of the items of a list answer under key.
func ids(t *testing.T, r response, key string) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var got []string
	for _, item := range r.json(t).(map[string]any)[key].([]any) {
		got = append(got, item.(map[string]any)["id"].(string))
	}
	slices.Sort(got)
	return got
}

// TestListBlocksFilters checks the state, team and tag parameters of GET
// /v1/blocks over what a member of team default may see; another team's
// block is never shown, whatever the filter.
func TestListBlocksFilters(t *testing.T) {
	fake := newFake()
	add := func(id, team string, state core.BlockState, tags map[string]string) {
		b := testBlock()
		b.ID, b.Team, b.State, b.Tags = id, team, state, tags
		fake.blocks[id] = b
	}
	add("cb-1", "default", core.StateScheduled, map[string]string{"env": "prod", "owner": "ada"})
	add("cb-2", "default", core.StateActive, map[string]string{"env": "prod"})
	add("cb-3", "default", core.StateExpired, map[string]string{"env": "dev", "owner": "ada"})
	add("cb-4", "default", core.StateCancelled, nil)
	add("cb-9", "other", core.StateActive, map[string]string{"env": "prod"})
	a := newTestAPI(t, fake, Options{})
	tests := map[string]struct {
		query     string
		want      []string
		wantState core.BlockState // what the service was asked for
	}{
		"no filter":                   {query: "", want: []string{"cb-1", "cb-2", "cb-3", "cb-4"}},
		"one state, by the service":   {query: "state=active", want: []string{"cb-2"}, wantState: core.StateActive},
		"several states":              {query: "state=active&state=scheduled", want: []string{"cb-1", "cb-2"}},
		"an empty state is no filter": {query: "state=", want: []string{"cb-1", "cb-2", "cb-3", "cb-4"}},
		"a tag":                       {query: "tag=env%3Dprod", want: []string{"cb-1", "cb-2"}},
		"every tag must match":        {query: "tag=env%3Dprod&tag=owner%3Dada", want: []string{"cb-1"}},
		"a tag and a state":           {query: "tag=owner%3Dada&state=expired", want: []string{"cb-3"}, wantState: core.StateExpired},
		"an empty tag value":          {query: "tag=env%3D", want: nil},
		"the caller's team":           {query: "team=default&state=cancelled", want: []string{"cb-4"}, wantState: core.StateCancelled},
		"another team: nothing shown": {query: "team=other", want: nil},
		"another team's tag":          {query: "team=other&tag=env%3Dprod", want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := a.do(t, http.MethodGet, "/v1/blocks?"+tc.query, "")
			if diff := cmp.Diff(tc.want, ids(t, r, "blocks")); diff != "" {
				t.Errorf("blocks (-want +got):\n%s", diff)
			}
			if fake.gotTeam != "default" || fake.gotState != tc.wantState {
				t.Errorf("the service was asked for team %q, state %q; want default, %q", fake.gotTeam, fake.gotState, tc.wantState)
			}
		})
	}
}

// TestListFiltersInvalid checks that a bad filter of each list is a 400
// problem that names the parameter.
func TestListFiltersInvalid(t *testing.T) {
	tests := map[string]struct {
		target string
		want   wantProblem
	}{
		"blocks: an unknown state": {target: "/v1/blocks?state=running",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"}},
		"blocks: an unknown state among good ones": {target: "/v1/blocks?state=active&state=bogus",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "payment-pending"}},
		"blocks: a tag without =": {target: "/v1/blocks?tag=env",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.tag[0]: expected a tag as key=value"}},
		"blocks: a tag without a key": {target: "/v1/blocks?tag=env%3Dprod&tag=%3Dprod",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.tag[1]: expected a tag as key=value"}},
		"blocks: one tag, two values": {target: "/v1/blocks?tag=env%3Dprod&tag=env%3Ddev",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "tag env is given twice"}},
		"blocks: a team id too long": {target: "/v1/blocks?team=" + strings.Repeat("t", 65),
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.team"}},
		"plans: an unknown state": {target: "/v1/plans?state=ended",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"}},
		"jobs: an unknown state": {target: "/v1/jobs?state=scheduled",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"}},
		"series: an unknown state": {target: "/v1/series?state=open",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"}},
		"orders: an unknown state": {target: "/v1/orders?state=active",
			want: wantProblem{http.StatusBadRequest, CodeInvalidArgument, "query.state"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newTestAPI(t, newFake(), Options{})
			checkProblem(t, a.do(t, http.MethodGet, tc.target, ""), tc.want)
		})
	}
}

// TestListJobsFilters checks the state and team parameters of a list
// whose service call takes neither: as a member, over its team's jobs;
// as an admin, over every team's.
func TestListJobsFilters(t *testing.T) {
	f := &jobsFake{fakeService: newFake(), jobs: []core.Job{
		{ID: "job-1", Team: "default", State: core.JobRunning},
		{ID: "job-2", Team: "default", State: core.JobFailed},
		{ID: "job-3", Team: "default", State: core.JobPending},
		{ID: "job-8", Team: "other", State: core.JobRunning},
		{ID: "job-9", Team: "other", State: core.JobFailed},
	}}
	a := &testAPI{handler: New(f, Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}), fake: f.fakeService}
	tests := map[string]struct {
		token, query string
		want         []string
	}{
		"a member: every job of its team":        {token: memberToken, query: "", want: []string{"job-1", "job-2", "job-3"}},
		"a member: two states":                   {token: memberToken, query: "state=running&state=failed", want: []string{"job-1", "job-2"}},
		"a member: another team is not shown":    {token: memberToken, query: "team=other", want: nil},
		"an admin: every team's":                 {token: adminToken, query: "state=failed", want: []string{"job-2", "job-9"}},
		"an admin: one team":                     {token: adminToken, query: "team=other", want: []string{"job-8", "job-9"}},
		"an admin: one team, one state":          {token: adminToken, query: "team=other&state=running", want: []string{"job-8"}},
		"an admin: a team that has none of them": {token: adminToken, query: "team=other&state=pending", want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := a.doAs(t, tc.token, http.MethodGet, "/v1/jobs?"+tc.query, "")
			if diff := cmp.Diff(tc.want, ids(t, r, "jobs")); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
		})
	}
}
