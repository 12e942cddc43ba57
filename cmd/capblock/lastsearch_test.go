package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuyByRow: a search is remembered beside the login, and `buy N` buys
// its row N; a row that no search printed, a search on another server and
// a search whose quotes expired are each one clear line and a non-zero
// exit.
func TestBuyByRow(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	api := newFakeAPI(t)
	other := newFakeAPI(t)
	search := []string{"offerings", "--type", "h100.8x", "--count", "2", "--duration", "48h"}
	steps := []struct {
		name         string
		url          string // the server, api's when empty
		args         []string
		want         result
		wantRequests []string // the requests of this step alone
	}{
		{
			name: "before any search",
			args: []string{"buy", "1", "--client-token", "tok-1"},
			want: result{code: 1, stderr: "capblock: there is no earlier search to take row 1 from: search with 'capblock offerings' first, or give an offering id (cbo-…)\n"},
		},
		{name: "the search", args: search, want: result{stdout: "*", stderr: "*"}},
		{
			name:         "row 2",
			args:         []string{"buy", "2", "--name", "load-test", "--client-token", "tok-2"},
			want:         result{stdout: "*", stderr: "client token: tok-2 (to retry this purchase safely, pass --client-token tok-2)\n"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-second","clientToken":"tok-2","name":"load-test"}`},
		},
		{
			name: "a row the search did not print",
			args: []string{"buy", "3", "--client-token", "tok-3"},
			want: result{code: 1, stderr: "capblock: row 3: your last search found 2 offerings; give a row from 1 to 2\n"},
		},
		{
			name:         "an id still buys that offering",
			args:         []string{"buy", "cbo-first", "--client-token", "tok-4"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-first","clientToken":"tok-4"}`},
		},
		{
			name: "a row of a search on another server",
			url:  other.URL,
			args: []string{"buy", "1", "--client-token", "tok-5"},
			want: result{code: 1, stderr: "capblock: your last search was on " + api.URL + ", not " + other.URL + ": search again with 'capblock offerings'\n"},
		},
		{name: "a search that finds nothing", args: []string{"offerings", "--type", "b200.8x", "--duration", "48h"}, want: result{stderr: "*"}},
		{
			name: "a row of it",
			args: []string{"buy", "1", "--client-token", "tok-6"},
			want: result{code: 1, stderr: "capblock: your last search found no offering: search again with 'capblock offerings'\n"},
		},
		{name: "a search of one", args: []string{"offerings", "--type", "l4.1x", "--duration", "4h"}, want: result{stdout: "*", stderr: "*"}},
		{
			name: "row 2 of one",
			args: []string{"buy", "2", "--client-token", "tok-7"},
			want: result{code: 1, stderr: "capblock: row 2: your last search found 1 offering; give row 1\n"},
		},
		{
			name: "its quote expired",
			args: []string{"buy", "1", "--client-token", "tok-8"},
			want: result{code: 1, stderr: "capblock: row 1 of your last search: offering_expired: the quote expired at 2026-11-20T10:10:00Z; " +
				"search again for a fresh quote with 'capblock offerings'\n"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-stale","clientToken":"tok-8"}`},
		},
		{
			name: "a plan row is another search",
			args: []string{"plans", "buy", "1", "--client-token", "tok-9"},
			want: result{code: 1, stderr: "capblock: there is no earlier search to take row 1 from: search with 'capblock plans offerings' first, or give an offering id (tpo-…)\n"},
		},
	}
	for _, step := range steps {
		url := api.URL
		if step.url != "" {
			url = step.url
		}
		before := len(api.seen())
		var seen func() []string
		if step.wantRequests != nil {
			seen = func() []string { return api.seen()[before:] }
		}
		t.Run(step.name, func(t *testing.T) { checkRun(t, url, seen, step.args, step.want, step.wantRequests) })
	}
	if got := other.seen(); len(got) != 0 {
		t.Errorf("the other server was asked %q", got)
	}

	// The search is the owner's only, like the login beside it.
	info, err := os.Stat(filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "capblock", "last-search.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("last-search.json: %v, %v; want mode 0600", info, err)
	}
}

// TestPlansBuyByRow: `plans buy N` buys row N of the last plan search.
func TestPlansBuyByRow(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	api := newPlanAPI(t)
	checkRun(t, api.URL, nil, []string{"plans", "offerings", "--type", "h100.8x", "--count", "4", "--duration", "48h"}, result{stdout: "*", stderr: "*"}, nil)
	checkRun(t, api.URL, nil, []string{"plans", "buy", "2", "--name", "llama", "--client-token", "tok-1"}, result{stdout: "*", stderr: "*"}, nil)
	if diff := cmp.Diff(`POST /v1/plans {"offeringId":"tpo-second","clientToken":"tok-1","name":"llama"}`, api.last()); diff != "" {
		t.Errorf("purchase (-want +got):\n%s", diff)
	}
	got := runApp(t.Context(), nil, "--url", api.URL, "plans", "buy", "9")
	if got.code != 1 || got.stderr != "capblock: row 9: your last search found 2 offerings; give a row from 1 to 2\n" {
		t.Errorf("row 9: %+v", got)
	}
}

// TestRowNumber: only a positive whole number is a row; anything else is
// an offering id, passed on as it is.
func TestRowNumber(t *testing.T) {
	for arg, want := range map[string]int{"1": 1, "12": 12, "0": 0, "-1": 0, "+1": 0, "1.0": 0, "cbo-1": 0, "": 0, " 1": 0} {
		row, ok := rowNumber(arg)
		if row != want || ok != (want > 0) {
			t.Errorf("rowNumber(%q) = %d, %v; want %d", arg, row, ok, want)
		}
	}
}
