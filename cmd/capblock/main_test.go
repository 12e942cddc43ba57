package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testNow is the wall clock the CLI sees in tests.
var testNow = time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

type result struct {
	code           int
	stdout, stderr string
}

// TestMain points the configuration directory at an empty temporary one,
// so that no test reads or writes the real home's login.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capblock-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir) // where os.UserConfigDir looks on Linux and BSDs
	os.Setenv("HOME", dir)            // and elsewhere
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runApp runs the CLI with args against url, with a fixed clock and env.
// The stored login is under $XDG_CONFIG_HOME (see TestMain and t.Setenv).
func runApp(ctx context.Context, env map[string]string, args ...string) result {
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }, now: func() time.Time { return testNow },
		configDir: os.UserConfigDir}
	code := a.execute(ctx, args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }

// checkRun runs the CLI with args against the API at url and compares
// its result with want: a stdout of "*" stands for any output but none,
// a stderr ending in "*" for any that starts with what precedes it. When
// wantRequests is not nil, seen must return those requests.
func checkRun(t *testing.T, url string, seen func() []string, args []string, want result, wantRequests []string) {
	t.Helper()
	got := runApp(t.Context(), nil, append([]string{"--url", url}, args...)...)
	if want.stdout == "*" {
		if got.stdout == "" {
			t.Errorf("stdout is empty")
		}
		want.stdout = got.stdout
	}
	if prefix, ok := strings.CutSuffix(want.stderr, "*"); ok && strings.HasPrefix(got.stderr, prefix) {
		want.stderr = got.stderr
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if wantRequests != nil {
		if diff := cmp.Diff(wantRequests, seen()); diff != "" {
			t.Errorf("requests mismatch (-want +got):\n%s", diff)
		}
	}
}

func TestCommands(t *testing.T) {
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string
	}{
		"types": {
			args: []string{"types"},
			want: result{stdout: lines(
				"NAME     GPU MODEL  GPUS  ON-DEMAND/H  ZONES",
				"h100.8x  H100       8     98.32 USD    zone-a,zone-b",
				"l4.1x    L4         1     1.00 USD     zone-b",
			)},
			wantRequests: []string{"GET /v1/instance-types"},
		},
		"nodes": {
			args: []string{"nodes"},
			want: result{stdout: lines(
				"NAME       ZONE    RACK  GPU MODEL  GPUS  HEALTH     LABELS",
				"a-h100-01  zone-a  a-r1  H100       8     healthy    fabric=ib",
				"b-l4-01    zone-b  b-r7  L4         4     unhealthy  -",
			)},
		},
		"offerings: 120 columns, the ids with -o wide; for another team": {
			args: []string{"offerings", "--type", "h100.8x", "--count", "2", "--duration", "2d", "--start-after", "tomorrow", "--end-before", "+14d", "--team", "team-1"},
			want: result{
				stdout: lines(
					"#  TYPE     COUNT  ZONE    START (UTC)       END (UTC)         HOURS  ALT  FEE          ON-DEMAND    SAVINGS",
					"1  h100.8x  2      zone-a  2026-12-01 00:00  2026-12-03 00:00  48     -    7078.08 USD  9438.72 USD  25%",
					"2  h100.8x  2      zone-b  2026-12-02 00:00  2026-12-04 01:00  49     yes  9438.72 USD  9635.36 USD  2%",
				),
				stderr: "buy one with: capblock buy ROW, e.g. capblock buy 1 (quotes expire at 2026-11-20 10:10 UTC)\n",
			},
			wantRequests: []string{"GET /v1/instance-types", "GET /healthz", "GET /v1/offerings?durationHours=48&endBefore=2026-12-05T09%3A30%3A00Z&instanceCount=2&instanceType=h100.8x&startAfter=2026-11-22T00%3A00%3A00Z&team=team-1"},
		},
		"offerings": {
			args: []string{"offerings", "-o", "wide", "--type", "h100.8x", "--count", "2", "--duration", "2d", "--start-after", "tomorrow", "--end-before", "+14d"},
			want: result{
				stdout: lines(
					"#  TYPE     COUNT  ZONE    START (UTC)       END (UTC)         HOURS  ALT  FEE          ON-DEMAND    SAVINGS  OFFERING ID",
					"1  h100.8x  2      zone-a  2026-12-01 00:00  2026-12-03 00:00  48     -    7078.08 USD  9438.72 USD  25%      cbo-first",
					"2  h100.8x  2      zone-b  2026-12-02 00:00  2026-12-04 01:00  49     yes  9438.72 USD  9635.36 USD  2%       cbo-second",
				),
				stderr: "buy one with: capblock buy ROW, e.g. capblock buy 1 (quotes expire at 2026-11-20 10:10 UTC)\n",
			},
			// Relative dates are read from the server's clock, a day ahead of this machine's.
			wantRequests: []string{"GET /v1/instance-types", "GET /healthz", "GET /v1/offerings?durationHours=48&endBefore=2026-12-05T09%3A30%3A00Z&instanceCount=2&instanceType=h100.8x&startAfter=2026-11-22T00%3A00%3A00Z"},
		},
		"offerings: default window is 14 days of starts": {
			args:         []string{"offerings", "--type", "h100.8x", "--duration", "48h"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /v1/instance-types", "GET /healthz", "GET /v1/offerings?durationHours=48&endBefore=2026-12-07T09%3A30%3A00Z&instanceCount=1&instanceType=h100.8x&startAfter=2026-11-21T09%3A30%3A00Z"},
		},
		"offerings: AWS names, as /aws takes them, map to capblock's types": {
			args: []string{"offerings", "--type", "p5.48xlarge", "--type", "ml.p5.48xlarge,l4.1x", "--duration", "48h"},
			want: result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /v1/instance-types", "GET /healthz", "GET /v1/offerings?durationHours=48&endBefore=2026-12-07T09%3A30%3A00Z" +
				"&instanceCount=1&instanceType=h100.8x&instanceType=h100.8x&instanceType=l4.1x&startAfter=2026-11-21T09%3A30%3A00Z"},
		},
		"offerings: a name neither capblock's nor AWS's is the server's to refuse": {
			args:         []string{"offerings", "--type", "bogus", "--duration", "48h"},
			want:         result{code: 1, stderr: "capblock: invalid_argument: unknown instance type \"bogus\" ('capblock types' lists them)\n"},
			wantRequests: []string{"GET /v1/instance-types", "GET /healthz", "GET /v1/offerings?durationHours=48&endBefore=2026-12-07T09%3A30%3A00Z&instanceCount=1&instanceType=bogus&startAfter=2026-11-21T09%3A30%3A00Z"},
		},
		"offerings: duration range, several types, zone": {
			args: []string{"offerings", "--type", "l4.1x,h100.8x", "--type", "a100.8x", "--min-duration", "4h", "--max-duration", "1d",
				"--start-after", "2026-12-01", "--end-before", "2026-12-02T12:00:00+02:00", "--zone", "zone-b", "--max-results", "3"},
			want: result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /v1/instance-types", "GET /v1/offerings?endBefore=2026-12-02T10%3A00%3A00Z&instanceCount=1&instanceType=l4.1x&instanceType=h100.8x&instanceType=a100.8x" +
				"&maxDurationHours=24&maxResults=3&minDurationHours=4&startAfter=2026-12-01T00%3A00%3A00Z&zone=zone-b"},
		},
		"offerings: nothing fits": {
			args: []string{"offerings", "--type", "b200.8x", "--duration", "1w"},
			want: result{stderr: "no offering fits: try a wider window (--start-after/--end-before), a smaller --count, another --zone or a shorter --duration\n"},
		},
		"offerings: the server's words for a field are the flag's": {
			args: []string{"offerings", "--type", "h100.8x", "--count", "0", "--duration", "1d"},
			want: result{code: 1, stderr: "capblock: invalid_argument: --count: expected number >= 1\n"},
		},
		"offerings: the server's field names in a sentence are flags": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "1d", "--zone", "zone-z"},
			want: result{code: 1, stderr: "capblock: invalid_argument: --end-before 2026-11-21T00:00:00Z must be after --start-after 2026-11-22T00:00:00Z\n"},
		},
		"offerings: a route the server names is the command that shows it": {
			args: []string{"offerings", "--type", "bogus", "--duration", "1d"},
			want: result{code: 1, stderr: "capblock: invalid_argument: unknown instance type \"bogus\" ('capblock types' lists them)\n"},
		},
		"offerings: no type": {
			args: []string{"offerings", "--duration", "48h"},
			want: result{code: 2, stderr: "capblock: required flag(s) \"type\" not set (see 'capblock offerings --help')\n"},
		},
		"offerings: no duration": {
			args: []string{"offerings", "--type", "h100.8x"},
			want: result{code: 2, stderr: "capblock: give --duration (e.g. 48h) or a range with --min-duration and --max-duration (see 'capblock offerings --help')\n"},
		},
		"offerings: duration and range": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "48h", "--max-duration", "72h"},
			want: result{code: 2, stderr: "capblock: give --duration or --min-duration/--max-duration, not both (see 'capblock offerings --help')\n"},
		},
		"offerings: not whole hours": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "90m"},
			want: result{code: 2, stderr: "capblock: --duration 90m is not a whole number of hours; capacity is sold by the hour (e.g. 1h, 48h, 3d) (see 'capblock offerings --help')\n"},
		},
		"offerings: bad duration": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "two days"},
			want: result{code: 2, stderr: "capblock: --duration \"two days\" is not a duration; write it in whole hours, like 48h, 3d, 2w or 1d12h (see 'capblock offerings --help')\n"},
		},
		"offerings: bad date": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "48h", "--end-before", "soon"},
			want: result{code: 2, stderr: "capblock: --end-before: \"soon\" is not a date; write now, today, tomorrow, +14d, +6h, 2026-12-01 or an RFC 3339 time like 2026-12-01T10:00:00Z (see 'capblock offerings --help')\n"},
		},
		"offerings: bad count": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "48h", "--count", "two"},
			want: result{code: 2, stderr: "capblock: invalid argument \"two\" for \"--count\" flag: strconv.ParseInt: parsing \"two\": invalid syntax (see 'capblock offerings --help')\n"},
		},
		"buy": {
			args: []string{"buy", "cbo-first", "--name", "load-test", "--tag", "env=prod", "--tag", "owner=a=b", "--client-token", "tok-1"},
			want: result{
				stdout: lines(
					"id:          cb-1",
					"name:        load-test",
					"team:        ml",
					"state:       scheduled",
					"instances:   2 × h100.8x (H100)",
					"zone:        zone-a",
					"start:       2026-12-01 00:00 UTC",
					"end:         2026-12-03 00:00 UTC",
					"hours:       48",
					"upfront fee: 7078.08 USD",
					"created:     2026-11-20 10:00 UTC",
					"tags:        env=prod",
				),
				stderr: "client token: tok-1 (to retry this purchase safely, pass --client-token tok-1)\n",
			},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-first","clientToken":"tok-1","name":"load-test","tags":{"env":"prod","owner":"a=b"}}`},
		},
		"buy: no capacity": {
			args:         []string{"buy", "cbo-gone", "--client-token", "tok-2"},
			want:         result{code: 1, stderr: "capblock: no_capacity: only 1 of 2 h100.8x free from 2026-12-01T00:00:00Z; search again for other times, zones or counts\n"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-gone","clientToken":"tok-2"}`},
		},
		"buy: a refusal names no block that was never made": {
			args: []string{"buy", "cbo-budget"},
			want: result{code: 1, stderr: "capblock: budget_exceeded: team ml would have spent 10000.01 of 10000.00 USD since 2026-11-01T00:00:00Z " +
				"(2921.93 USD before this change); an admin can change the team's budget with 'capblock teams budget'\n"},
		},
		"buy: the quote bought already": {
			args: []string{"buy", "cbo-used", "--client-token", "tok-3"},
			want: result{code: 1, stderr: "capblock: offering_used: this quote already bought a block (a quote buys one); " +
				"search again for a new quote, or repeat the first purchase's --client-token to get its block\n"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-used","clientToken":"tok-3"}`},
		},
		"buy: no offering": {
			args: []string{"buy"},
			want: result{code: 2, stderr: "capblock: capblock buy needs the row number or offering id (from 'capblock offerings') (see 'capblock buy --help')\n"},
		},
		"buy: bad tag": {
			args: []string{"buy", "cbo-first", "--tag", "=x"},
			want: result{code: 2, stderr: "capblock: --tag \"=x\": write it as KEY=VALUE (see 'capblock buy --help')\n"},
		},
		"blocks list": {
			args: []string{"blocks", "list", "--state", "scheduled"},
			want: result{stdout: lines(
				"ID    NAME       TEAM  STATE      INSTANCES    START (UTC)       END (UTC)         FEE",
				"cb-1  load-test  ml    scheduled  2 × h100.8x  2026-12-01 00:00  2026-12-03 00:00  7078.08 USD",
				"cb-2  -          ml    active     1 × l4.1x    2026-11-20 12:00  2026-11-20 16:00  3.00 USD",
			)},
			// An administrator is shown whose each block is, even of one team.
			wantRequests: []string{"GET /v1/blocks?state=scheduled", "GET /v1/whoami", "GET /v1/teams"},
		},
		"blocks list: bad state": {
			args: []string{"blocks", "list", "--state", "running"},
			want: result{code: 2, stderr: "capblock: --state \"running\": choose one of [payment-pending scheduled active expired payment-failed cancelled failed] (see 'capblock blocks list --help')\n"},
		},
		"blocks show: not found": {
			args: []string{"blocks", "show", "cb-9"},
			want: result{code: 1, stderr: "capblock: not_found: block cb-9 not found\n"},
		},
		"blocks status": {
			args: []string{"blocks", "status", "cb-1"},
			want: result{stdout: lines(
				"capacity:   2 total, 1 available, 1 unavailable (degraded: no free node to replace a failed one)",
				"placement:  tentative until 2026-11-30 23:00 UTC (may still move)",
				"",
				"NODE       GPUS",
				"a-h100-01  0-7",
				"a-h100-02  0-3,5",
			)},
			wantRequests: []string{"GET /v1/blocks/cb-1/status"},
		},
		"blocks cancel": {
			args: []string{"blocks", "cancel", "cb-1", "--yes"},
			want: result{stdout: "*", stderr: lines(
				"cancelling block cb-1 (load-test): scheduled, 2 × h100.8x in zone-a, 2026-12-01 00:00 to 2026-12-03 00:00 UTC, fee 7078.08 USD; "+
					"it has not started: refund 3539.04 USD (50% of the fee before the start, the operator's policy)",
				"cancelled block cb-1: nothing was refunded",
			)},
			wantRequests: []string{"GET /v1/blocks/cb-1", "GET /healthz", "GET /v1/policy", "GET /v1/blocks/cb-1/cancel-quote", "POST /v1/blocks/cb-1/cancel", "GET /v1/teams/ml/ledger"},
		},
		"blocks cancel: started, and the ledger's refund": {
			args: []string{"blocks", "cancel", "cb-2", "-y"},
			want: result{stdout: "*", stderr: lines(
				"cancelling block cb-2: active, 1 × l4.1x in zone-b, 2026-11-20 12:00 to 2026-11-20 16:00 UTC, fee 3.00 USD; "+
					"it started at 2026-11-20 12:00 UTC: no refund, an early release (the operator's policy refunds 0% after the start)",
				"cancelled block cb-2: refunded 3.00 USD",
			)},
		},
		"blocks cancel: no terminal and no --yes": {
			args:         []string{"blocks", "cancel", "cb-1"},
			want:         result{code: 2, stderr: "capblock: cancel asks for confirmation, and there is no terminal to answer: pass --yes to cancel without asking (see 'capblock blocks cancel --help')\n"},
			wantRequests: []string{},
		},
		"blocks extension-offerings": {
			args: []string{"blocks", "extension-offerings", "cb-1", "--duration", "1d"},
			want: result{
				stdout: lines(
					"#  TYPE     COUNT  ZONE    START (UTC)       END (UTC)         HOURS  ALT  FEE          ON-DEMAND    SAVINGS",
					"1  h100.8x  2      zone-a  2026-12-03 00:00  2026-12-04 00:00  24     -    3539.04 USD  4719.36 USD  25%",
				),
				stderr: "extend with: capblock blocks extend cb-1 --duration 1d (-o wide shows the offering ids, for --offering)\n",
			},
			wantRequests: []string{"GET /v1/blocks/cb-1/extension-offerings?durationHours=24"},
		},
		"blocks extend by a duration buys the first offering": {
			args: []string{"blocks", "extend", "cb-1", "--duration", "24h", "--yes"},
			want: result{stdout: "*", stderr: lines(
				"extending block cb-1 (load-test) by 24h, from 2026-12-03 00:00 to 2026-12-04 00:00 UTC, for 3539.04 USD (4719.36 USD on demand)",
				"extended block cb-1 to 2026-12-04 00:00 UTC: charged 3539.04 USD (its fee is now 10617.12 USD)",
			)},
			wantRequests: []string{
				"GET /v1/blocks/cb-1",
				"GET /v1/blocks/cb-1/extension-offerings?durationHours=24",
				`POST /v1/blocks/cb-1/extensions {"offeringId":"cbe-ext"}`,
			},
		},
		"blocks extend with an offering": {
			args: []string{"blocks", "extend", "cb-1", "--offering", "cbe-chosen", "--yes"},
			want: result{stdout: "*", stderr: lines(
				"extending block cb-1 (load-test), which ends at 2026-12-03 00:00 UTC, with extension offering cbe-chosen for the fee it was listed with",
				"extended block cb-1 to 2026-12-04 00:00 UTC: charged 3539.04 USD (its fee is now 10617.12 USD)",
			)},
			wantRequests: []string{"GET /v1/blocks/cb-1", `POST /v1/blocks/cb-1/extensions {"offeringId":"cbe-chosen"}`},
		},
		"blocks extend: no terminal and no --yes": {
			args:         []string{"blocks", "extend", "cb-1", "--duration", "24h"},
			want:         result{code: 2, stderr: "capblock: extend asks for confirmation, and there is no terminal to answer: pass --yes to extend without asking (see 'capblock blocks extend --help')\n"},
			wantRequests: []string{},
		},
		"blocks extend: the offering extended already": {
			args: []string{"blocks", "extend", "cb-1", "--offering", "cbe-used", "-y"},
			want: result{code: 1, stderr: "extending block cb-1 (load-test), which ends at 2026-12-03 00:00 UTC, with extension offering cbe-used for the fee it was listed with\n" +
				"capblock: offering_used: this extension offering already extended block cb-1 " +
				"(an extension offering extends once); ask for a fresh one; search again with 'capblock blocks extension-offerings', or extend with --duration\n"},
			wantRequests: []string{"GET /v1/blocks/cb-1", `POST /v1/blocks/cb-1/extensions {"offeringId":"cbe-used"}`},
		},
		"blocks extend: nothing available": {
			args:         []string{"blocks", "extend", "cb-1", "--duration", "999h", "--yes"},
			want:         result{code: 1, stderr: "capblock: no extension of block cb-1 by 999h is available (the capacity after its end is taken, or it ends too soon); try a shorter --duration\n"},
			wantRequests: []string{"GET /v1/blocks/cb-1", "GET /v1/blocks/cb-1/extension-offerings?durationHours=999"},
		},
		"blocks extend: neither flag": {
			args: []string{"blocks", "extend", "cb-1"},
			want: result{code: 2, stderr: "capblock: give --duration (e.g. 24h) or --offering (from 'capblock blocks extension-offerings') (see 'capblock blocks extend --help')\n"},
		},
		"blocks: unknown subcommand": {
			args: []string{"blocks", "delete", "cb-1"},
			want: result{code: 2, stderr: "capblock: unknown command \"delete\" for \"capblock blocks\" (see 'capblock blocks --help')\n"},
		},
		"events": {
			args: []string{"events"},
			want: result{
				stdout: lines("TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA", "2026-12-01 00:00  block.active               cb-1                   evt-1                  {\"zone\":\"zone-a\"}", "2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2"),
				stderr: "next: capblock events --after c2\n",
			},
			wantRequests: []string{"GET /v1/events"},
		},
		"events of a type": {
			args: []string{"events", "--type", "block.expiration-warning"},
			want: result{stdout: lines("TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA", "2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2"), stderr: "next: capblock events --after c2\n"},
		},
		"events of a family and a subject": {
			args: []string{"events", "--type", "block.*", "--subject", "cb-1"},
			want: result{stdout: lines("TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA", "2026-12-01 00:00  block.active               cb-1                   evt-1                  {\"zone\":\"zone-a\"}", "2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2"), stderr: "next: capblock events --after c2\n"},
		},
		"events: none match": {
			args: []string{"events", "--type", "job.*"},
			want: result{stderr: "no events of type job.*\nnext: capblock events --after c2\n"},
		},
		"admin clock": {
			args:         []string{"admin", "clock"},
			want:         result{stdout: "2026-12-01T00:00:00Z\n"},
			wantRequests: []string{"GET /v1/admin/clock"},
		},
		"admin clock --advance": {
			args:         []string{"admin", "clock", "--advance", "6h"},
			want:         result{stdout: "2026-12-01T06:00:00Z\n"},
			wantRequests: []string{`POST /v1/admin/clock {"advance":"6h0m0s"}`},
		},
		"admin clock --now": {
			args:         []string{"admin", "clock", "--now", "2026-12-01"},
			want:         result{stdout: "2026-12-01T06:00:00Z\n"},
			wantRequests: []string{`POST /v1/admin/clock {"now":"2026-12-01T00:00:00Z"}`},
		},
		"admin clock --now, relative to the server's clock": {
			args:         []string{"admin", "clock", "--now", "+6h"},
			want:         result{stdout: "2026-12-01T06:00:00Z\n"},
			wantRequests: []string{"GET /healthz", `POST /v1/admin/clock {"now":"2026-11-21T15:30:00Z"}`},
		},
		"admin clock: both": {
			args: []string{"admin", "clock", "--advance", "1h", "--now", "now"},
			want: result{code: 2, stderr: "capblock: give --advance or --now, not both (see 'capblock admin clock --help')\n"},
		},
		"unknown command": {
			args: []string{"reserve"},
			want: result{code: 2, stderr: "capblock: unknown command \"reserve\" for \"capblock\"; did you mean: serve (see 'capblock --help')\n"},
		},
		"bad output format": {
			args: []string{"-o", "toml", "types"},
			want: result{code: 2, stderr: "capblock: -o \"toml\": choose table, wide, json, yaml or jsonpath=TEMPLATE (see 'capblock types --help')\n"},
		},
		"extra argument": {
			args: []string{"types", "h100.8x"},
			want: result{code: 2, stderr: "capblock: capblock types takes no arguments, got \"h100.8x\" (see 'capblock types --help')\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			checkRun(t, api.URL, api.seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}

// TestJSONOutput checks that -o json prints the API's JSON, pretty.
func TestJSONOutput(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // the JSON, compared after decoding
	}{
		"types": {
			args: []string{"types"},
			want: `{"instanceTypes": [
				{"name": "h100.8x", "gpuModel": "H100", "gpusPerInstance": 8, "onDemandPrice": {"amount": "98.32", "currency": "USD"}, "zones": ["zone-a", "zone-b"],
					"awsNames": ["p5.48xlarge", "ml.p5.48xlarge"]},
				{"name": "l4.1x", "gpuModel": "L4", "gpusPerInstance": 1, "onDemandPrice": {"amount": "1.00", "currency": "USD"}, "zones": ["zone-b"]}]}`,
		},
		"offerings": {
			args: []string{"offerings", "--type", "h100.8x", "--duration", "48h"},
			want: `{"offerings": [` + offering1 + `, ` + offering2 + `]}`,
		},
		"empty offerings are an empty list": {
			args: []string{"offerings", "--type", "b200.8x", "--duration", "48h"},
			want: `{"offerings": []}`,
		},
		"blocks show": {
			args: []string{"blocks", "show", "cb-1"},
			want: block1,
		},
		"blocks list": {
			args: []string{"blocks", "list"},
			want: `{"blocks": [` + block1 + `, ` + block2 + `]}`,
		},
		"buy adds the client token": {
			args: []string{"buy", "cbo-first", "--client-token", "tok-9"},
			want: strings.Replace(block1, `"id": "cb-1",`, `"id": "cb-1", "clientToken": "tok-9",`, 1),
		},
		"events": {
			args: []string{"events"},
			want: `{"events": [
				{"id": "evt-1", "time": "2026-12-01T00:00:00Z", "type": "block.active", "subject": "cb-1", "team": "ml", "data": {"zone": "zone-a"}},
				{"id": "evt-2", "time": "2026-12-02T23:20:00Z", "type": "block.expiration-warning", "subject": "cb-1", "team": "ml", "data": {}}],
				"next": "c2"}`,
		},
		"clock": {
			args: []string{"admin", "clock"},
			want: `{"now": "2026-12-01T00:00:00Z"}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			got := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "json"}, tc.args...)...)
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			if !strings.Contains(got.stdout, "\n  ") {
				t.Errorf("stdout is not indented:\n%s", got.stdout)
			}
			var gotJSON, wantJSON any
			if err := json.Unmarshal([]byte(got.stdout), &gotJSON); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
			}
			if err := json.Unmarshal([]byte(tc.want), &wantJSON); err != nil {
				t.Fatalf("bad test JSON: %v", err)
			}
			if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
				t.Errorf("JSON mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDurationHelpListsOnlyWholeHours checks that no help of a command
// that sells by the hour gives an example that it then refuses.
func TestDurationHelpListsOnlyWholeHours(t *testing.T) {
	for _, args := range [][]string{{"offerings", "--help"}, {"plans", "offerings", "--help"}, {"blocks", "extend", "--help"},
		{"blocks", "extension-offerings", "--help"}, {"teams", "quota", "--help"}} {
		got := runApp(t.Context(), nil, args...)
		if got.code != 0 || got.stdout == "" {
			t.Fatalf("%v: %+v", args, got)
		}
		if m := regexp.MustCompile(`\b\d+m\b|\d+h\d+m`).FindString(got.stdout); m != "" {
			t.Errorf("%v lists %q, a length that is not whole hours:\n%s", args, m, got.stdout)
		}
	}
}

// TestBuyingAQuoteTwice checks that a quote buys one block however often
// it is bought: the second purchase shows the first one's block, and one
// under another name says which block the quote bought.
func TestBuyingAQuoteTwice(t *testing.T) {
	api := newFakeAPI(t)
	first := runApp(t.Context(), nil, "--url", api.URL, "buy", "cbo-first", "--name", "load-test")
	if first.code != 0 || strings.Contains(first.stderr, "already bought") {
		t.Fatalf("first purchase: %+v", first)
	}
	again := runApp(t.Context(), nil, "--url", api.URL, "buy", "cbo-first", "--name", "load-test")
	wantNote := "this quote already bought block cb-1 on 2026-11-20 10:00 UTC; nothing was charged again (see it with 'capblock blocks show cb-1')\n"
	if again.code != 0 || !strings.HasPrefix(again.stderr, wantNote) || !strings.Contains(again.stdout, "cb-1") {
		t.Errorf("the same purchase again: %+v, want the block and the note %q", again, wantNote)
	}
	renamed := runApp(t.Context(), nil, "--url", api.URL, "buy", "cbo-first", "--name", "other")
	want := result{code: 1, stderr: "capblock: this quote already bought block cb-1, with another --name, --tag or --team: " +
		"see it with 'capblock blocks show cb-1', or search again for a new quote\n"}
	if diff := cmp.Diff(want, renamed, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("the quote under another name (-want +got):\n%s", diff)
	}
	// Each purchase sent the same token, made from the offering id.
	var tokens []string
	for _, r := range api.seen() {
		if _, body, ok := strings.Cut(r, "POST /v1/blocks "); ok {
			var b struct{ ClientToken string }
			json.Unmarshal([]byte(body), &b)
			tokens = append(tokens, b.ClientToken)
		}
	}
	if len(tokens) != 3 || tokens[0] != tokens[1] || tokens[1] != tokens[2] || !strings.HasPrefix(tokens[0], "cli-") {
		t.Errorf("client tokens %q, want one token three times", tokens)
	}
	// Another quote is another purchase.
	other := runApp(t.Context(), nil, "--url", api.URL, "-o", "json", "buy", "cbo-second")
	if other.code != 0 || strings.Contains(other.stderr, "already bought") || strings.Contains(other.stdout, tokens[0]) {
		t.Errorf("another quote: %+v", other)
	}
}

// TestExtendingTwice checks that extending with the same offering again
// (a rerun after a lost answer) shows the same block, says that the
// offering extended it before and charges nothing again.
func TestExtendingTwice(t *testing.T) {
	api := newFakeAPI(t)
	extend := func() result {
		return runApp(t.Context(), nil, "--url", api.URL, "blocks", "extend", "cb-1", "--offering", "cbe-chosen", "--yes")
	}
	first, again := extend(), extend()
	wantFirst := "extended block cb-1 to 2026-12-04 00:00 UTC: charged 3539.04 USD (its fee is now 10617.12 USD)\n"
	if first.code != 0 || !strings.HasSuffix(first.stderr, wantFirst) {
		t.Fatalf("first extension: %+v, want the note %q", first, wantFirst)
	}
	if again.code != 0 || again.stdout != first.stdout {
		t.Errorf("the same extension again: %+v, want the first one's block:\n%s", again, first.stdout)
	}
	wantAgain := "this offering already extended block cb-1 to 2026-12-04 00:00 UTC; nothing was charged again (its fee is 10617.12 USD)\n"
	if !strings.HasSuffix(again.stderr, wantAgain) {
		t.Errorf("the same extension again: stderr %q, want it to end with %q", again.stderr, wantAgain)
	}
}

func TestEventsFollowStopsCleanly(t *testing.T) {
	api := newFakeAPI(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result)
	go func() { done <- runApp(ctx, nil, "--url", api.URL, "-o", "json", "events", "-f") }()
	<-api.polled // the second long poll is waiting: both events are printed
	cancel()     // what Ctrl-C does
	got := <-done
	want := result{stdout: lines(
		`{"id":"evt-1","time":"2026-12-01T00:00:00Z","type":"block.active","subject":"cb-1","team":"ml","data":{"zone":"zone-a"}}`,
		`{"id":"evt-2","time":"2026-12-02T23:20:00Z","type":"block.expiration-warning","subject":"cb-1","team":"ml","data":{}}`,
	)}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"GET /v1/events?wait=30s", "GET /v1/events?after=c2&wait=30s"}, api.seen()); diff != "" {
		t.Errorf("requests mismatch (-want +got):\n%s", diff)
	}
}

func TestServerAddressAndToken(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		w.Write([]byte(`{"nodes": []}`))
	}))
	t.Cleanup(srv.Close)

	env := map[string]string{"CAPBLOCK_URL": srv.URL, "CAPBLOCK_TOKEN": "from-env"}
	if got := runApp(t.Context(), env, "nodes"); got.code != 0 {
		t.Fatalf("with CAPBLOCK_URL: exit %d, stderr %q", got.code, got.stderr)
	}
	if got := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": "http://127.0.0.1:1"}, "--url", srv.URL, "--token", "from-flag", "nodes"); got.code != 0 {
		t.Fatalf("--url over CAPBLOCK_URL: exit %d, stderr %q", got.code, got.stderr)
	}
	if diff := cmp.Diff([]string{"Bearer from-env", "Bearer from-flag"}, auth); diff != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", diff)
	}
}

func TestServerNotRunning(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	got := runApp(t.Context(), map[string]string{"CAPBLOCK_URL": url}, "blocks", "list")
	want := result{code: 1, stderr: "capblock: listing blocks: the capblock server is not reachable at " + url +
		" (connection refused); start it with `capblock serve` or set --url or CAPBLOCK_URL to its address\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

func TestClockWithoutSimClock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "no route")
	}))
	t.Cleanup(srv.Close)
	got := runApp(t.Context(), nil, "--url", srv.URL, "admin", "clock", "--advance", "1d")
	want := result{code: 1, stderr: "capblock: the server has no simulated clock: start it with 'capblock serve --sim-clock'\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
}

// TestRun checks main's entry point: the real environment, help on stdout.
func TestRun(t *testing.T) {
	api := newFakeAPI(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"--url", api.URL, "types"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "h100.8x") {
		t.Errorf("run types: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "capblock serve") || errOut.Len() != 0 {
		t.Errorf("run --help: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"--url", api.URL, "blocks", "show", "cb-404"}, &out, &errOut); code != 1 || strings.Count(errOut.String(), "\n") != 1 || out.Len() != 0 {
		t.Errorf("run failing command: exit %d, stdout %q, stderr %q; want 1 and one line on stderr", code, out.String(), errOut.String())
	}
}
