package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Longest names the API takes (internal/api: maxLength).
var (
	longName     = strings.Repeat("n", 120) + "-128-end" // blocks, plans, series, orders, jobs: 128
	longTeamName = strings.Repeat("t", 55) + "-63-team"  // teams and users: 63
	longUserName = strings.Repeat("u", 55) + "-63-user"
	longURL      = "https://example.com/" + strings.Repeat("w", 2048-len("https://example.com/"))
)

// TestTablesFitTheirWidth runs every list command against a real server
// holding names of the longest length the API takes (and against a fake
// one for what the real one cannot hold here), and checks that
// each line of a table is at most 120 columns, that a cut value ends in
// an ellipsis, and that -o wide and -o json still show it whole.
func TestTablesFitTheirWidth(t *testing.T) {
	if len(longName) != 128 || len(longTeamName) != 63 || len(longUserName) != 63 || len(longURL) != 2048 {
		t.Fatal("the long names are not of the longest lengths")
	}
	_, url, token := realServer(t, time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC))
	run := func(args ...string) result {
		t.Helper()
		r := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": url, "CAPBLOCK_TOKEN": token}, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}

	// 1. Fill the server with the longest names.
	run("teams", "create", longTeamName)
	run("users", "create", longUserName, "--team", longTeamName, "--role", "member")
	var userToken struct{ Token string }
	if err := json.Unmarshal([]byte(run("-o", "json", "tokens", "create", "--user", longUserName).stdout), &userToken); err != nil {
		t.Fatal(err)
	}
	// The user's own request, for the audit log to name the user and
	// its team.
	if r := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": url, "CAPBLOCK_TOKEN": userToken.Token},
		"webhooks", "create", longURL, "--event", "*"); r.code != 0 {
		t.Fatalf("a webhook of the user's: exit %d: %s", r.code, r.stderr)
	}
	// No access key: this server holds no secrets key to seal one with.
	run("offerings", "--type", "l4.1x", "--count", "1", "--duration", "8h", "--start-after", "2027-03-16", "--team", longTeamName)
	run("buy", "1", "--name", longName, "--team", longTeamName)
	run("plans", "offerings", "--type", "l4.1x", "--count", "1", "--duration", "16h", "--start-after", "2027-04-10")
	run("plans", "buy", "1", "--name", longName)
	run("series", "search", "--type", "l4.1x", "--count", "1", "--days", "weekdays", "--start", "09:00", "--end", "17:00",
		"--tz", "Europe/Madrid", "--from", "2027-03-22", "--weeks", "1")
	run("series", "buy", "1", "--name", longName)
	run("orders", "create", "--type", "l4.1x", "--count", "1", "--duration", "8h", "--start-after", "2027-05-01",
		"--end-before", "2027-05-03", "--mode", "buy", "--max-fee", "0.01", "--name", longName)
	// No job: this server has no jobs directory to run one in.
	run("webhooks", "create", longURL, "--event", "block.*", "--event", "plan.*", "--event", "series.*", "--team", longTeamName)
	webhook := strings.Fields(run("-o", "json", "webhooks", "list").stdout)
	var webhookID string
	for _, f := range webhook {
		if id, ok := strings.CutPrefix(strings.Trim(f, `",`), "wh-"); ok {
			webhookID = "wh-" + id
			break
		}
	}

	// 2. Every list, in a table: no line past 120 columns, and the long
	// values are cut where they would be.
	lists := [][]string{
		{"blocks", "list"}, {"plans", "list"}, {"series", "list"}, {"orders", "list"},
		{"teams", "list"}, {"users", "list"}, {"tokens", "list"},
		{"webhooks", "list"}, {"webhooks", "deliveries", webhookID}, {"events"}, {"audit"},
		{"types"}, {"nodes"}, {"spend"},
	}
	for _, args := range lists {
		table := run(args...).stdout
		if table == "" {
			t.Errorf("%v printed nothing", args)
		}
		for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > maxTableWidth {
				t.Errorf("%v: a line of %d columns: %q", args, n, line)
			}
		}
		// --no-headers leaves the header line out, and every row in.
		_, rows, _ := strings.Cut(table, "\n")
		bare := run(append([]string{"--no-headers"}, args...)...).stdout
		if got, want := strings.Count(bare, "\n"), strings.Count(rows, "\n"); got != want || strings.Contains(bare, "ID  ") || strings.Contains(bare, "NAME  ") {
			t.Errorf("%v --no-headers: %d lines, want the %d rows alone:\n%s", args, got, want, bare)
		}
	}
	for _, args := range [][]string{{"blocks", "list"}, {"plans", "list"}, {"series", "list"}, {"users", "list"}, {"spend"}} {
		if table := run(args...).stdout; !strings.Contains(table, "…") {
			t.Errorf("%v cut no long value:\n%s", args, table)
		}
	}

	// What this server cannot hold comes from a fake one: a delivery
	// that failed, saying why with the URL (no delivery is attempted
	// here), a job (no jobs directory) and an access key (no secrets key).
	fake := httptest.NewServer(longFakeAPI())
	defer fake.Close()
	for _, tc := range []struct {
		args  []string
		whole string // shown whole with -o wide
	}{
		{[]string{"webhooks", "deliveries", "wh-1"}, longURL},
		{[]string{"jobs", "list"}, longName},
		{[]string{"access-keys", "list"}, longUserName},
	} {
		got := runApp(t.Context(), nil, append([]string{"--url", fake.URL}, tc.args...)...)
		if got.code != 0 || !strings.Contains(got.stdout, "…") {
			t.Errorf("%v: exit %d, nothing cut: %s%s", tc.args, got.code, got.stdout, got.stderr)
		}
		for _, line := range strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > maxTableWidth {
				t.Errorf("%v: a line of %d columns: %q", tc.args, n, line)
			}
		}
		if wide := runApp(t.Context(), nil, append([]string{"--url", fake.URL, "-o", "wide"}, tc.args...)...); !strings.Contains(wide.stdout, tc.whole) {
			t.Errorf("%v -o wide does not show %q whole:\n%s", tc.args, tc.whole[:20]+"…", wide.stdout)
		}
	}

	// 3. -o wide and -o json show the values whole.
	whole := map[string][]string{
		"blocks list":   {longName},
		"plans list":    {longName},
		"series list":   {longName},
		"teams list":    {longTeamName},
		"users list":    {longUserName},
		"webhooks list": {longURL},
	}
	for cmd, values := range whole {
		for _, output := range []string{"wide", "json"} {
			got := run(append([]string{"-o", output}, strings.Fields(cmd)...)...).stdout
			for _, v := range values {
				if !strings.Contains(got, v) {
					t.Errorf("%s -o %s does not show %q whole:\n%s", cmd, output, v[:20]+"…", got)
				}
			}
		}
	}
	// Spend's JSON has the team's id; its table, the name.
	if got := run("-o", "wide", "spend").stdout; !strings.Contains(got, longTeamName) {
		t.Errorf("spend -o wide does not show the team's name whole:\n%s", got)
	}
	// Events print each offering id in their data whole with -o wide.
	var events struct {
		Events []struct{ Data map[string]any }
	}
	if err := json.Unmarshal([]byte(run("-o", "json", "events").stdout), &events); err != nil {
		t.Fatal(err)
	}
	wideEvents := run("-o", "wide", "events").stdout
	offerings := 0
	for _, e := range events.Events {
		if id, ok := e.Data["offeringId"].(string); ok {
			offerings++
			if !strings.Contains(wideEvents, id) {
				t.Errorf("events -o wide does not show offering id %s whole:\n%s", id, wideEvents)
			}
		}
	}
	if offerings == 0 {
		t.Errorf("no event names an offering id: %+v", events)
	}
	// The audit log's JSON has the user's id; its table, the name.
	if got := run("-o", "wide", "audit").stdout; !strings.Contains(got, longUserName) || !strings.Contains(got, longTeamName) {
		t.Errorf("audit -o wide does not show the user's and the team's names whole:\n%s", got)
	}
}

// longFakeAPI serves a delivery log, jobs and access keys with the
// longest values the API takes.
func longFakeAPI() http.Handler {
	mux := http.NewServeMux()
	reply := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/webhooks/{id}/deliveries", reply(`{"deliveries": [{"id": "whd-1", "eventId": "evt-0123456789abcdef0",
		"attempt": 1, "time": "2027-03-15T00:00:00Z", "nextAttemptAt": "2027-03-15T00:00:01Z",
		"error": "no answer: Post \"`+longURL+`\": dial tcp: lookup example.com: no such host"}]}`))
	mux.HandleFunc("GET /v1/jobs", reply(`{"jobs": [{"id": "job-0123456789abcdef0", "name": "`+longName+`", "blockId": "cb-0123456789abcdef0",
		"command": ["true"], "instanceCount": 16, "state": "failed", "restarts": 3, "createdAt": "2027-03-15T00:00:00Z",
		"reason": "instance 15 exited 137 (killed: out of memory) after 3 restarts, the most allowed (maxRestarts 3)"}]}`))
	mux.HandleFunc("GET /v1/access-keys", reply(`{"accessKeys": [{"id": "ak-0123456789abcdef0", "accessKeyId": "AKCB0123456789ABCDEF",
		"user": "usr-0123456789abcdef0", "team": "team-0123456789abcdef0", "createdAt": "2027-03-15T00:00:00Z"}]}`))
	mux.HandleFunc("GET /v1/users", reply(`{"users": [{"id": "usr-0123456789abcdef0", "name": "`+longUserName+`", "team": "team-0123456789abcdef0", "role": "member"}]}`))
	mux.HandleFunc("GET /v1/teams", reply(`{"teams": [{"id": "team-0123456789abcdef0", "name": "`+longTeamName+`"}]}`))
	return mux
}
