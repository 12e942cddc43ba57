package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

const (
	series1 = `{"id": "cs-1", "name": "workshop", "team": "ml", "instanceType": "h100.8x", "instanceCount": 2, "zone": "zone-a",
		"schedule": {"daysOfWeek": ["mon"], "startTime": "09:00", "endTime": "17:00", "timeZone": "UTC", "fromDate": "2026-11-16", "toDate": "2026-12-06"},
		"state": "active", "upfrontFee": {"amount": "21234.24", "currency": "USD"}, "createdAt": "2026-11-10T00:00:00Z", "occurrences": [
		{"blockId": "cb-0", "startTime": "2026-11-16T09:00:00Z", "endTime": "2026-11-16T17:00:00Z", "localStartTime": "2026-11-16T09:00:00Z",
			"localEndTime": "2026-11-16T17:00:00Z", "durationHours": 8, "state": "cancelled", "upfrontFee": {"amount": "7078.08", "currency": "USD"}},
		{"blockId": "cb-2", "startTime": "2026-11-23T09:00:00Z", "endTime": "2026-11-23T17:00:00Z", "localStartTime": "2026-11-23T09:00:00Z",
			"localEndTime": "2026-11-23T17:00:00Z", "durationHours": 8, "state": "active", "upfrontFee": {"amount": "7078.08", "currency": "USD"}},
		{"blockId": "cb-1", "startTime": "2026-11-30T09:00:00Z", "endTime": "2026-11-30T17:00:00Z", "localStartTime": "2026-11-30T09:00:00Z",
			"localEndTime": "2026-11-30T17:00:00Z", "durationHours": 8, "state": "scheduled", "upfrontFee": {"amount": "7078.08", "currency": "USD"}}]}`
	order1 = `{"id": "co-1", "name": "cheap", "team": "ml", "mode": "buy", "instanceType": "l4.1x", "instanceCount": 4, "durationHours": 8,
		"startAfter": "2026-12-01T00:00:00Z", "endBefore": "2026-12-03T00:00:00Z", "deadline": "2026-12-01T00:00:00Z",
		"maxFee": {"amount": "10.00", "currency": "USD"}, "state": "open"}`
	job1       = `{"id": "job-1", "name": "train", "team": "ml", "blockId": "cb-1", "command": ["python", "train.py"], "instanceCount": 2, "state": "running"}`
	accessKey1 = `{"id": "ak-1", "accessKeyId": "AKCB0000000000000001", "user": "usr-2", "team": "team-1", "createdAt": "2026-11-01T00:00:00Z"}`
)

// destructiveRoutes serves the series, orders, jobs and access keys that
// the destructive commands act on, and a plan, for names to be looked up
// among every kind.
func (f *fakeAPI) destructiveRoutes(mux *http.ServeMux) {
	ok := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/series", ok(`{"series": [`+series1+`]}`))
	mux.HandleFunc("GET /v1/series/{id}", ok(series1))
	mux.HandleFunc("POST /v1/series/{id}/cancel", ok(strings.ReplaceAll(series1, `"active"`, `"cancelled"`)))
	mux.HandleFunc("GET /v1/orders", ok(`{"orders": [`+order1+`]}`))
	mux.HandleFunc("GET /v1/orders/{id}", ok(order1))
	mux.HandleFunc("POST /v1/orders/{id}/cancel", ok(strings.Replace(order1, `"open"`, `"cancelled"`, 1)))
	mux.HandleFunc("GET /v1/jobs", ok(`{"jobs": [`+job1+`]}`))
	mux.HandleFunc("GET /v1/jobs/{id}", ok(job1))
	mux.HandleFunc("POST /v1/jobs/{id}/stop", ok(strings.Replace(job1, `"running"`, `"stopped"`, 1)))
	mux.HandleFunc("GET /v1/plans", ok(`{"plans": [{"id": "tp-1", "name": "llama-ft", "state": "active"}]}`))
	mux.HandleFunc("GET /v1/access-keys", ok(`{"accessKeys": [`+accessKey1+`]}`))
	mux.HandleFunc("DELETE /v1/access-keys/{id}", ok(strings.Replace(accessKey1, `}`, `, "revokedAt": "2026-11-20T09:30:00Z"}`, 1)))
}

// TestDestructiveCommandsConfirm checks that every command that cancels,
// deletes, revokes or stops follows one rule: it says what will happen,
// asks at a terminal and acts on "y" only, refuses in one line without a
// terminal unless --yes is given, and with --yes acts without asking.
func TestDestructiveCommandsConfirm(t *testing.T) {
	commands := map[string]struct {
		args        []string
		what        string // in what it says will happen
		destructive string // the request that does it
	}{
		"blocks cancel": {
			args:        []string{"blocks", "cancel", "cb-1"},
			what:        "cancelling block cb-1 (load-test): scheduled",
			destructive: "POST /v1/blocks/cb-1/cancel",
		},
		"series cancel": {
			args:        []string{"series", "cancel", "workshop"},
			what:        "cancelling series cs-1 (workshop): 2 of 3 occurrences, those not yet ended, 2 × h100.8x in zone-a; refund 3539.04 USD in total (the operator's policy): cb-2 (Mon 2026-11-23 09:00 +00:00, active), cb-1 (Mon 2026-11-30 09:00 +00:00, scheduled)",
			destructive: "POST /v1/series/cs-1/cancel",
		},
		"webhooks delete": {
			args:        []string{"webhooks", "delete", "wh-1"},
			what:        "deleting webhook wh-1 (team team-1, https://example.com/capblock, events block.*,plan.committed): its delivery log goes with it",
			destructive: "DELETE /v1/webhooks/wh-1",
		},
		"orders cancel": {
			args:        []string{"orders", "cancel", "cheap"},
			what:        "withdrawing order co-1 (cheap): open, buy 4 × l4.1x for 8h by 2026-12-03 00:00 UTC; nothing is bought for it from then on",
			destructive: "POST /v1/orders/co-1/cancel",
		},
		"jobs stop": {
			args:        []string{"jobs", "stop", "train"},
			what:        `stopping job job-1 (train): running, 2 instance(s) of "python train.py"`,
			destructive: "POST /v1/jobs/job-1/stop",
		},
		"tokens revoke": {
			args:        []string{"tokens", "revoke", "tok-2"},
			what:        "revoking token tok-2 of user usr-2, created 2026-11-01 00:00: requests with it are refused from now on",
			destructive: "DELETE /v1/tokens/tok-2",
		},
		"access-keys revoke": {
			args:        []string{"access-keys", "revoke", "AKCB0000000000000001"},
			what:        "revoking access key ak-1 (AKCB0000000000000001) of user usr-2, created 2026-11-01 00:00",
			destructive: "DELETE /v1/access-keys/AKCB0000000000000001",
		},
	}
	for name, cmd := range commands {
		t.Run(name, func(t *testing.T) {
			run := func(terminal bool, answer string, extra ...string) (result, []string) {
				t.Helper()
				api := newFakeAPI(t)
				var out, errOut bytes.Buffer
				a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, now: func() time.Time { return testNow },
					configDir: os.UserConfigDir, stdin: strings.NewReader(answer), interactive: func() bool { return terminal }}
				code := a.execute(t.Context(), append(append([]string{"--url", api.URL}, cmd.args...), extra...))
				return result{code: code, stdout: out.String(), stderr: errOut.String()}, api.seen()
			}
			sent := func(requests []string) bool {
				for _, r := range requests {
					if strings.HasPrefix(r, cmd.destructive) {
						return true
					}
				}
				return false
			}

			t.Run("at a terminal, yes", func(t *testing.T) {
				got, requests := run(true, "y\n")
				if got.code != 0 || !strings.Contains(got.stderr, cmd.what) || !strings.Contains(got.stderr, "? [y/N] ") || !sent(requests) {
					t.Errorf("exit %d, stderr %q, requests %q; want exit 0, %q then a question, and %s", got.code, got.stderr, requests, cmd.what, cmd.destructive)
				}
				if i, j := strings.Index(got.stderr, cmd.what), strings.Index(got.stderr, "[y/N]"); i > j {
					t.Errorf("stderr %q asks before it says what will happen", got.stderr)
				}
			})
			t.Run("at a terminal, no", func(t *testing.T) {
				got, requests := run(true, "n\n")
				if got.code != 1 || !strings.Contains(got.stderr, cmd.what) || !strings.Contains(got.stderr, " was not ") || sent(requests) {
					t.Errorf("exit %d, stderr %q, requests %q; want exit 1, %q, a refusal and no %s", got.code, got.stderr, requests, cmd.what, cmd.destructive)
				}
			})
			t.Run("no terminal", func(t *testing.T) {
				got, requests := run(false, "y\n")
				if got.code != 2 || !strings.Contains(got.stderr, "pass --yes") || strings.Count(got.stderr, "\n") != 1 || len(requests) != 0 {
					t.Errorf("exit %d, stderr %q, requests %q; want exit 2, one line saying to pass --yes, and nothing asked of the server",
						got.code, got.stderr, requests)
				}
			})
			t.Run("no terminal, --yes", func(t *testing.T) {
				got, requests := run(false, "", "--yes")
				if got.code != 0 || !strings.Contains(got.stderr, cmd.what) || strings.Contains(got.stderr, "[y/N]") || !sent(requests) {
					t.Errorf("exit %d, stderr %q, requests %q; want exit 0, %q without a question, and %s", got.code, got.stderr, requests, cmd.what, cmd.destructive)
				}
			})
		})
	}
}
