package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAccessCommands(t *testing.T) {
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string
	}{
		"teams list": {
			args: []string{"teams", "list"},
			want: result{stdout: lines(
				"ID      NAME      CREATED (UTC)     STATE",
				"team-0  ops       2026-10-01 00:00  enabled",
				"team-1  research  2026-11-01 00:00  enabled",
			)},
			wantRequests: []string{"GET /v1/teams"},
		},
		"teams create": {
			args: []string{"teams", "create", "vision"},
			want: result{
				stdout: lines(
					"ID      NAME    CREATED (UTC)     STATE",
					"team-2  vision  2026-11-20 09:30  enabled",
				),
				stderr: "add people with: capblock users create NAME --team team-2 --role member\n",
			},
			wantRequests: []string{`POST /v1/teams {"name":"vision"}`},
		},
		"teams show": {
			args: []string{"teams", "show", "team-1"},
			want: result{stdout: lines(
				"id:      team-1",
				"name:    research",
				"created: 2026-11-01 00:00 UTC",
				"",
				"TYPE       MAX PER BLOCK  MAX HELD  MAX DURATION  MAX LEAD",
				"all types  default        16        3d            4w",
				"h100.8x    4              default   default       default",
			)},
			wantRequests: []string{"GET /v1/teams/team-1", "GET /v1/teams/team-1/quotas"},
		},
		"teams show: default quotas": {
			args: []string{"teams", "show", "team-0"},
			want: result{stdout: lines(
				"id:      team-0",
				"name:    ops",
				"created: 2026-10-01 00:00 UTC",
				"quotas:  the operator's defaults",
			)},
		},
		"teams show: not found": {
			args: []string{"teams", "show", "team-9"},
			want: result{code: 1, stderr: "capblock: not_found: team team-9 not found\n"},
		},
		"teams quota lists": {
			args: []string{"teams", "quota", "team-1"},
			want: result{stdout: lines(
				"TYPE       MAX PER BLOCK  MAX HELD  MAX DURATION  MAX LEAD",
				"all types  default        16        3d            4w",
				"h100.8x    4              default   default       default",
			)},
			wantRequests: []string{"GET /v1/teams/team-1/quotas"},
		},
		"teams quota changes the limits named and keeps the others": {
			args: []string{"teams", "quota", "team-1", "--max-held", "32", "--max-duration", "1w"},
			want: result{stdout: lines(
				"TYPE       MAX PER BLOCK  MAX HELD  MAX DURATION  MAX LEAD",
				"all types  default        32        1w            4w",
			)},
			wantRequests: []string{
				"GET /v1/teams/team-1/quotas",
				`PUT /v1/teams/team-1/quotas {"maxInstancesPerBlock":0,"maxInstancesHeld":32,"maxDurationHours":168,"maxLeadDays":28}`,
			},
		},
		"teams quota of one type": {
			args: []string{"teams", "quota", "team-1", "--type", "h100.8x", "--max-lead", "2w", "--max-per-block", "0"},
			want: result{stdout: "*"},
			wantRequests: []string{
				"GET /v1/teams/team-1/quotas",
				`PUT /v1/teams/team-1/quotas {"instanceType":"h100.8x","maxInstancesPerBlock":0,"maxInstancesHeld":0,"maxDurationHours":0,"maxLeadDays":14}`,
			},
		},
		"teams quota: a new row of a type": {
			args: []string{"teams", "quota", "team-1", "--type", "l4.1x", "--max-held", "2"},
			want: result{stdout: "*"},
			wantRequests: []string{
				"GET /v1/teams/team-1/quotas",
				`PUT /v1/teams/team-1/quotas {"instanceType":"l4.1x","maxInstancesPerBlock":0,"maxInstancesHeld":2,"maxDurationHours":0,"maxLeadDays":0}`,
			},
		},
		"teams quota: not a duration": {
			args: []string{"teams", "quota", "team-1", "--max-lead", "soon"},
			want: result{code: 2, stderr: "capblock: --max-lead \"soon\" is not a duration; write it in whole days, like 28d or 4w, or 0 for the default (see 'capblock teams quota --help')\n"},
		},
		"teams quota: not whole hours": {
			args: []string{"teams", "quota", "team-1", "--max-duration", "90m"},
			want: result{code: 2, stderr: "capblock: --max-duration 90m is not a whole number of hours (see 'capblock teams quota --help')\n"},
		},
		"teams quota: a type without a limit": {
			args: []string{"teams", "quota", "team-1", "--type", "h100.8x"},
			want: result{code: 2, stderr: "capblock: --type picks the row to change: give a limit too (--max-per-block, --max-held, --max-duration or --max-lead) (see 'capblock teams quota --help')\n"},
		},
		"teams budget": {
			args:         []string{"teams", "budget", "team-1", "--amount", "1000.00", "--period", "month"},
			want:         result{stdout: "budget of team team-1: 1000.00 USD per month\n"},
			wantRequests: []string{`PUT /v1/teams/team-1/budget {"amount":{"amount":"1000.00","currency":"USD"},"period":"month"}`},
		},
		"teams budget in total, in euros": {
			args:         []string{"teams", "budget", "team-1", "--amount", "50", "--currency", "EUR", "--period", "total"},
			want:         result{stdout: "budget of team team-1: 50 EUR in total\n"},
			wantRequests: []string{`PUT /v1/teams/team-1/budget {"amount":{"amount":"50","currency":"EUR"},"period":"total"}`},
		},
		"teams budget none": {
			args:         []string{"teams", "budget", "team-1", "--period", "none"},
			want:         result{stdout: "budget of team team-1: none\n"},
			wantRequests: []string{`PUT /v1/teams/team-1/budget {"amount":{"amount":"0.00","currency":"USD"},"period":"none"}`},
		},
		"teams budget: no amount": {
			args: []string{"teams", "budget", "team-1", "--period", "month"},
			want: result{code: 2, stderr: "capblock: give the --amount of the budget, e.g. 1000.00 (see 'capblock teams budget --help')\n"},
		},
		"teams budget: bad amount": {
			args: []string{"teams", "budget", "team-1", "--period", "month", "--amount", "1e3"},
			want: result{code: 2, stderr: "capblock: --amount: amount \"1e3\": *"},
		},
		"teams budget: bad period": {
			args: []string{"teams", "budget", "team-1", "--period", "week", "--amount", "1"},
			want: result{code: 2, stderr: "capblock: --period \"week\": choose one of [month total none] (see 'capblock teams budget --help')\n"},
		},
		"teams ledger": {
			args: []string{"teams", "ledger", "team-1"},
			want: result{stdout: lines(
				"SEQ  TIME (UTC)        KIND    AMOUNT       SUBJECT  JOURNAL",
				"1    2026-11-20 10:00  charge  7078.08 USD  cb-1     jr-1",
				"2    2026-11-20 11:00  refund  3.00 USD     cb-2     jr-2",
				"3    2026-11-20 12:00  credit  50.00 USD    cb-1     jr-3",
				"",
				"gross:   7078.08 USD",
				"refunds: 3.00 USD",
				"credits: 50.00 USD",
				"net:     7025.08 USD",
				"spent:   7075.08 USD (what the budget counts in its period)",
				"budget:  10000.00 USD per month",
			)},
			wantRequests: []string{"GET /v1/teams/team-1/ledger"},
		},
		"users list": {
			args: []string{"users", "list"},
			want: result{stdout: lines(
				"ID     NAME  TEAM    ROLE    CREATED (UTC)     STATE",
				"usr-1  root  team-0  admin   2026-10-01 00:00  enabled",
				"usr-2  ada   team-1  member  2026-11-01 00:00  enabled",
			)},
			wantRequests: []string{"GET /v1/users"},
		},
		"users create": {
			args: []string{"users", "create", "grace", "--team", "team-1", "--role", "viewer"},
			want: result{
				stdout: lines(
					"ID     NAME   TEAM    ROLE    CREATED (UTC)     STATE",
					"usr-3  grace  team-1  viewer  2026-11-20 09:30  enabled",
				),
				stderr: "give grace a token with: capblock tokens create --user usr-3\n",
			},
			wantRequests: []string{`POST /v1/users {"name":"grace","team":"team-1","role":"viewer"}`},
		},
		"users create: bad role": {
			args: []string{"users", "create", "grace", "--team", "team-1", "--role", "owner"},
			want: result{code: 2, stderr: "capblock: --role \"owner\": choose one of [admin member viewer] (see 'capblock users create --help')\n"},
		},
		"users create: no team": {
			args: []string{"users", "create", "grace", "--role", "member"},
			want: result{code: 2, stderr: "capblock: required flag(s) \"team\" not set (see 'capblock users create --help')\n"},
		},
		"tokens list": {
			args: []string{"tokens", "list"},
			want: result{stdout: lines(
				"ID     USER   STATE                     CREATED (UTC)     EXPIRES (UTC)",
				"tok-1  usr-1  active                    2026-10-01 00:00  never",
				"tok-2  usr-2  active                    2026-11-01 00:00  2026-12-01 00:00",
				"tok-3  usr-2  revoked 2026-11-10 00:00  2026-11-01 00:00  never",
			)},
			wantRequests: []string{"GET /v1/tokens"},
		},
		"tokens create for a user": {
			args: []string{"tokens", "create", "--user", "usr-2", "--expires-in", "30d"},
			want: result{
				stdout: lines(
					"token:   "+newTokenSecret,
					"id:      tok-9",
					"user:    usr-2",
					"expires: 2026-12-20 09:30 UTC",
				),
				stderr: "this token is shown only now and cannot be shown again: store it (e.g. in a file for 'capblock login --token-file FILE'); revoke it with 'capblock tokens revoke tok-9'\n",
			},
			wantRequests: []string{`POST /v1/users/usr-2/tokens {"expiresIn":"720h0m0s"}`},
		},
		"tokens create for oneself asks the server who that is": {
			args: []string{"tokens", "create"},
			want: result{stdout: "*", stderr: "*"},
			wantRequests: []string{
				"GET /v1/whoami",
				`POST /v1/users/usr-1/tokens {}`,
			},
		},
		"tokens create: short lifetime": {
			args: []string{"tokens", "create", "--user", "usr-2", "--expires-in", "30s"},
			want: result{code: 2, stderr: "capblock: --expires-in 30s: a token lives at least a minute (see 'capblock tokens create --help')\n"},
		},
		"tokens revoke": {
			args: []string{"tokens", "revoke", "tok-2", "--yes"},
			want: result{stderr: "revoking token tok-2 of user usr-2, created 2026-11-01 00:00: requests with it are refused from now on\n", stdout: lines(
				"ID     USER   STATE                     CREATED (UTC)     EXPIRES (UTC)",
				"tok-2  usr-2  revoked 2026-11-20 09:30  2026-11-01 00:00  never",
			)},
			wantRequests: []string{"GET /v1/tokens", "DELETE /v1/tokens/tok-2"},
		},
		"spend": {
			args: []string{"spend", "--team", "team-1", "--from", "2026-11", "--to", "2026-12"},
			want: result{stdout: lines(
				"TEAM      TYPE     MONTH    GROSS        REFUNDS   CREDITS    NET          SAVINGS %  GPU-H RESERVED  USED    IDLE",
				"research  h100.8x  2026-11  7078.08 USD  0.00 USD  50.00 USD  7028.08 USD  25%        768             600.50  167.50",
				"research  l4.1x    2026-12  3.00 USD     0.00 USD  0.00 USD   3.00 USD     25%        0               0       0",
				"total                       7081.08 USD  0.00 USD  50.00 USD  7031.08 USD  25%        768             600.50  167.50",
			)},
			wantRequests: []string{"GET /v1/spend?from=2026-11&team=team-1&to=2026-12", "GET /v1/teams"},
		},
		"spend -o wide: every column": {
			args: []string{"-o", "wide", "spend", "--team", "team-1", "--from", "2026-11", "--to", "2026-12"},
			want: result{stdout: lines(
				"TEAM      TYPE     MONTH    GROSS        REFUNDS   CREDITS    NET          SPENT        ON-DEMAND    SAVINGS      SAVINGS %  GPU-H RESERVED  USED    LENT  IDLE",
				"research  h100.8x  2026-11  7078.08 USD  0.00 USD  50.00 USD  7028.08 USD  7078.08 USD  9438.72 USD  2360.64 USD  25%        768             600.50  0     167.50",
				"research  l4.1x    2026-12  3.00 USD     0.00 USD  0.00 USD   3.00 USD     3.00 USD     4.00 USD     1.00 USD     25%        0               0       0     0",
				"total                       7081.08 USD  0.00 USD  50.00 USD  7031.08 USD  7081.08 USD  9442.72 USD  2361.64 USD  25%        768             600.50  0     167.50",
			)},
		},
		"spend: none": {
			args:         []string{"spend", "--team", "team-0"},
			want:         result{stderr: "no spend in that period\n"},
			wantRequests: []string{"GET /v1/spend?team=team-0"},
		},
		"spend: bad month": {
			args: []string{"spend", "--from", "2026-13"},
			want: result{code: 2, stderr: "capblock: --from \"2026-13\" is not a month; write it like 2026-12 (see 'capblock spend --help')\n"},
		},
		"spend: backwards": {
			args: []string{"spend", "--from", "2026-12", "--to", "2026-11"},
			want: result{code: 2, stderr: "capblock: --to 2026-11 is before --from 2026-12 (see 'capblock spend --help')\n"},
		},
		"audit": {
			args: []string{"audit", "--after", "6"},
			want: result{
				stdout: lines(
					"SEQ  TIME (UTC)        USER  TEAM      REQUEST          SUBJECT  STATUS  OUTCOME",
					"7    2026-11-20 10:00  root  ops       POST /v1/teams   -        201     ok",
					"8    2026-11-20 10:05  ada   research  POST /v1/blocks  -        409     no_capacity",
				),
				stderr: "next: capblock audit --after 8\n",
			},
			wantRequests: []string{"GET /v1/audit?after=6", "GET /v1/teams", "GET /v1/users"},
		},
		"buy for another team": {
			args:         []string{"buy", "cbo-first", "--client-token", "tok-1", "--team", "team-1"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{`POST /v1/blocks {"offeringId":"cbo-first","clientToken":"tok-1","team":"team-1"}`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			checkRun(t, api.URL, api.seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}

// TestAccessJSONOutput checks that -o json prints the API's JSON.
func TestAccessJSONOutput(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // the JSON, compared after decoding
	}{
		"teams list":   {args: []string{"teams", "list"}, want: `{"teams": [` + teamOps + `, ` + teamResearch + `]}`},
		"teams create": {args: []string{"teams", "create", "vision"}, want: `{"id": "team-2", "name": "vision", "createdAt": "2026-11-20T09:30:00Z"}`},
		"teams show adds the quotas": {
			args: []string{"teams", "show", "team-1"},
			want: `{"id": "team-1", "name": "research", "createdAt": "2026-11-01T00:00:00Z", "quotas": [
				{"maxInstancesPerBlock": 0, "maxInstancesHeld": 16, "maxDurationHours": 72, "maxLeadDays": 28},
				{"instanceType": "h100.8x", "maxInstancesPerBlock": 4, "maxInstancesHeld": 0, "maxDurationHours": 0, "maxLeadDays": 0}]}`,
		},
		"teams quota": {args: []string{"teams", "quota", "team-1"}, want: quotasJSON},
		"teams quota set": {
			args: []string{"teams", "quota", "team-1", "--max-per-block", "8"},
			want: `{"maxInstancesPerBlock": 8, "maxInstancesHeld": 16, "maxDurationHours": 72, "maxLeadDays": 28}`,
		},
		"teams budget": {
			args: []string{"teams", "budget", "team-1", "--amount", "1000.00", "--period", "month"},
			want: `{"amount": {"amount": "1000.00", "currency": "USD"}, "period": "month"}`,
		},
		"teams ledger":  {args: []string{"teams", "ledger", "team-1"}, want: ledgerJSON},
		"users list":    {args: []string{"users", "list"}, want: `{"users": [` + userRoot + `, ` + userAda + `]}`},
		"users create":  {args: []string{"users", "create", "grace", "--team", "team-1", "--role", "viewer"}, want: `{"id": "usr-3", "name": "grace", "team": "team-1", "role": "viewer", "createdAt": "2026-11-20T09:30:00Z"}`},
		"tokens list":   {args: []string{"tokens", "list"}, want: `{"tokens": [` + tokenRoot + `, ` + tokenAda + `, ` + tokenAdaOld + `]}`},
		"tokens revoke": {args: []string{"tokens", "revoke", "tok-2", "--yes"}, want: `{"id": "tok-2", "user": "usr-2", "createdAt": "2026-11-01T00:00:00Z", "revokedAt": "2026-11-20T09:30:00Z"}`},
		"spend":         {args: []string{"spend"}, want: spendJSON},
		"audit":         {args: []string{"audit"}, want: auditJSON},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			got := runApp(t.Context(), nil, append([]string{"--url", api.URL, "-o", "json"}, tc.args...)...)
			// With --yes a command still says on stderr what it does;
			// stdout is the JSON alone.
			if got.code != 0 || (got.stderr != "" && !slices.Contains(tc.args, "--yes")) {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			assertJSON(t, tc.want, got.stdout)
		})
	}
}

// assertJSON compares JSON documents after decoding them.
func assertJSON(t *testing.T, want, got string) {
	t.Helper()
	var gotJSON, wantJSON any
	if err := json.Unmarshal([]byte(got), &gotJSON); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &wantJSON); err != nil {
		t.Fatalf("bad test JSON: %v", err)
	}
	if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", diff)
	}
}

// TestTokensCreateJSON checks that the new token is in the JSON, once, with
// the warning on stderr.
func TestTokensCreateJSON(t *testing.T) {
	api := newFakeAPI(t)
	got := runApp(t.Context(), nil, "--url", api.URL, "-o", "json", "tokens", "create", "--user", "usr-2")
	if got.code != 0 || !strings.Contains(got.stderr, "shown only now") {
		t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
	}
	assertJSON(t, `{"id": "tok-9", "user": "usr-2", "createdAt": "2026-11-20T09:30:00Z", "token": "`+newTokenSecret+`"}`, got.stdout)
}
