package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serveJSON answers every GET of path with body.
func serveJSON(t *testing.T, routes map[string]string) string {
	t.Helper()
	mux := http.NewServeMux()
	for route, body := range routes {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestBlockViews(t *testing.T) {
	pending := strings.Replace(strings.Replace(block1, `"scheduled"`, `"payment-pending"`, 1), `"cb-1"`, `"cb-7"`, 1)
	otherTeam := strings.Replace(strings.Replace(block2, `"ml"`, `"vision"`, 1), `"cb-2"`, `"cb-3"`, 1)
	tests := map[string]struct {
		routes map[string]string
		args   []string
		want   string // lines of stdout that must be there
	}{
		"blocks of several teams have a TEAM column": {
			routes: map[string]string{"GET /v1/blocks": `{"blocks": [` + block1 + `, ` + otherTeam + `]}`,
				"GET /v1/teams": `{"teams": [{"id": "vision", "name": "Vision"}, {"id": "ml", "name": "ML research"}]}`},
			args: []string{"blocks", "list"},
			want: lines(
				"ID    NAME       TEAM         STATE      INSTANCES    START (UTC)       END (UTC)         FEE",
				"cb-1  load-test  ML research  scheduled  2 × h100.8x  2026-12-01 00:00  2026-12-03 00:00  7078.08 USD",
				"cb-3  -          Vision       active     1 × l4.1x    2026-11-20 12:00  2026-11-20 16:00  3.00 USD",
			),
		},
		"a payment-pending block says what it waits for, and until when": {
			routes: map[string]string{"GET /v1/blocks/{id}": pending},
			args:   []string{"blocks", "show", "cb-7"},
			want: "state:       payment-pending: waits for an administrator's approval ('capblock blocks approve cb-7') until 2026-11-30 23:55 UTC, " +
				"5m before its start by default; then it is payment-failed and its charge reversed\n",
		},
		"a final placement says since when": {
			routes: map[string]string{"GET /v1/blocks/{id}/status": `{"totalCapacity": 2, "availableCapacity": 2, "placementFinal": true,
				"lockInTime": "2026-11-30T23:00:00Z", "placements": [{"node": "a-h100-01", "gpus": [0,1,2,3,4,5,6,7]}]}`},
			args: []string{"blocks", "status", "cb-1"},
			want: "placement:  final since its lock-in at 2026-11-30 23:00 UTC\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url := serveJSON(t, tc.routes)
			got := runApp(t.Context(), nil, append([]string{"--url", url}, tc.args...)...)
			if got.code != 0 {
				t.Fatalf("exit %d: %s", got.code, got.stderr)
			}
			if !strings.Contains(got.stdout, tc.want) {
				t.Errorf("stdout lacks the lines (-want +got):\n%s", cmp.Diff(tc.want, got.stdout))
			}
		})
	}
}

// TestLocalTime checks that --local-time shows every time of a command in
// the machine's zone and names it, in tables and in messages alike.
func TestLocalTime(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		args       []string
		wantStdout string
		wantStderr string
	}{
		{args: []string{"blocks", "list"}, wantStdout: "START (CET)       END (CET)  ", wantStderr: ""},
		{args: []string{"blocks", "list"}, wantStdout: "2026-12-01 01:00  2026-12-03 01:00"},
		{args: []string{"blocks", "show", "cb-1"}, wantStdout: "start:       2026-12-01 01:00 CET\n"},
		{args: []string{"events"}, wantStdout: "TIME (CET)        TYPE"},
		{args: []string{"offerings", "--type", "h100.8x", "--duration", "2d"}, wantStdout: "START (CET)",
			wantStderr: "(quotes expire at 2026-11-20 11:10 CET)"},
	} {
		var out, errOut bytes.Buffer
		a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, now: func() time.Time { return testNow },
			configDir: os.UserConfigDir, local: time.FixedZone("CET", 3600)}
		if code := a.execute(t.Context(), append([]string{"--url", api.URL, "--local-time"}, tc.args...)); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut.String())
		}
		if !strings.Contains(out.String(), tc.wantStdout) || !strings.Contains(errOut.String(), tc.wantStderr) {
			t.Errorf("%v: stdout %q, stderr %q; want %q and %q in them", tc.args, out.String(), errOut.String(), tc.wantStdout, tc.wantStderr)
		}
		if strings.Contains(out.String()+errOut.String(), "UTC") {
			t.Errorf("%v: a time in UTC under --local-time:\n%s%s", tc.args, out.String(), errOut.String())
		}
	}
	// Without the flag, UTC again: the zone is the command line's, not the process's.
	got := runApp(t.Context(), nil, "--url", api.URL, "blocks", "show", "cb-1")
	if !strings.Contains(got.stdout, "start:       2026-12-01 00:00 UTC\n") {
		t.Errorf("after --local-time, a command without it shows:\n%s", got.stdout)
	}
}

// TestBlocksListFits checks that a list of blocks with the service's ids
// (cb- and 17 hex digits), a name, a fee in the ten thousands and a TEAM
// column fits 120 columns.
func TestBlocksListFits(t *testing.T) {
	long := func(b, id, team string) string {
		b = strings.Replace(b, `"id": "cb-1"`, `"id": "`+id+`"`, 1)
		b = strings.Replace(b, `"id": "cb-2"`, `"id": "`+id+`"`, 1)
		b = strings.Replace(b, `"name": "load-test"`, `"name": "llama-eval"`, 1)
		return strings.Replace(b, `"team": "ml"`, `"team": "`+team+`"`, 1)
	}
	url := serveJSON(t, map[string]string{
		"GET /v1/blocks": `{"blocks": [` + long(strings.Replace(block1, `"7078.08"`, `"17078.08"`, 1), "cb-d7de01116f0cc3c09", "team-6043aca048fd77baf") + `, ` +
			long(block2, "cb-b7872be785e77d697", "team-9acd505953480e97d") + `]}`,
		"GET /v1/teams": `{"teams": [{"id": "team-6043aca048fd77baf", "name": "research"}, {"id": "team-9acd505953480e97d", "name": "vision"}]}`,
	})
	got := runApp(t.Context(), nil, "--url", url, "blocks", "list")
	if got.code != 0 || !strings.Contains(got.stdout, "TEAM") {
		t.Fatalf("exit %d, stdout:\n%s%s", got.code, got.stdout, got.stderr)
	}
	for _, line := range strings.Split(strings.TrimSuffix(got.stdout, "\n"), "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("a line of %d columns, more than 120:\n%s", n, line)
		}
	}
}

// TestNothingToConfirm checks that cancel and extend of a block in a state
// that allows neither say so at once, before asking anything.
func TestNothingToConfirm(t *testing.T) {
	url := serveJSON(t, map[string]string{"GET /v1/blocks/{id}": strings.Replace(block1, `"scheduled"`, `"expired"`, 1)})
	for args, want := range map[string]string{
		"blocks cancel cb-1 --yes":               "capblock: block cb-1 (load-test) is expired: only payment-pending, scheduled or active blocks can be cancelled\n",
		"blocks extend cb-1 --duration 1d --yes": "capblock: block cb-1 (load-test) is expired: only scheduled or active blocks can be extended\n",
	} {
		got := runApp(t.Context(), nil, append([]string{"--url", url}, strings.Fields(args)...)...)
		if diff := cmp.Diff(result{code: 1, stderr: want}, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", args, diff)
		}
	}
}

// TestEventColumns checks that the service's longest ids (job- and evt-
// with 17 hex digits) keep two spaces between the columns of an event.
func TestEventColumns(t *testing.T) {
	url := serveJSON(t, map[string]string{"GET /v1/events": `{"events": [{"id": "evt-121b1366005505e1c", "time": "2026-12-05T05:00:00Z",
		"type": "job.pending", "subject": "job-aec9e54e1789853d2", "team": "ml", "data": {"state": "pending"}}], "next": "c1"}`})
	got := runApp(t.Context(), nil, "--url", url, "events")
	want := "2026-12-05 05:00  job.pending                job-aec9e54e1789853d2  evt-121b1366005505e1c  {\"state\":\"pending\"}\n"
	if !strings.HasSuffix(got.stdout, want) {
		t.Errorf("stdout:\n%s\nwant its last line:\n%s", got.stdout, want)
	}
}
