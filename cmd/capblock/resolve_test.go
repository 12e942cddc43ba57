package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// namesAPI lists blocks, plans and jobs with names, one name of each
// kind taken twice, and answers a get of any of them by id.
func namesAPI(t *testing.T) (url string, seen func() []string) {
	t.Helper()
	var (
		mu  sync.Mutex
		log []string
	)
	mux := http.NewServeMux()
	reply := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	mux.HandleFunc("GET /v1/blocks", reply(`{"blocks": [`+block1+`, `+block2+`,
		{"id": "cb-3", "name": "twice", "state": "expired"}, {"id": "cb-4", "name": "twice", "state": "active"}]}`))
	mux.HandleFunc("GET /v1/blocks/{id}", reply(block1))
	mux.HandleFunc("GET /v1/blocks/{id}/status", reply(`{"totalCapacity": 2, "availableCapacity": 2, "placementFinal": true}`))
	mux.HandleFunc("POST /v1/blocks/{id}/cancel", reply(block1))
	mux.HandleFunc("GET /v1/blocks/{id}/cancel-quote", reply(`{"refund": {"amount": "7078.08", "currency": "USD"}}`))
	mux.HandleFunc("GET /v1/policy", reply(`{"refundBeforeStartPercent": 100}`))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Capblock-Now", serverNow.Format(time.RFC3339))
		reply(`{"status": "ok"}`)(w, r)
	})
	mux.HandleFunc("GET /v1/teams/{id}/ledger", reply(`{"entries": [], "spent": {"amount": "0.00", "currency": "USD"}}`))
	mux.HandleFunc("GET /v1/blocks/{id}/extension-offerings", reply(`{"offerings": [`+extension+`]}`))
	mux.HandleFunc("POST /v1/blocks/{id}/extensions", reply(block1Extended))
	mux.HandleFunc("GET /v1/plans", reply(`{"plans": [{"id": "tp-1", "name": "llama-ft", "state": "active"},
		{"id": "tp-2", "name": "twice", "state": "expired"}, {"id": "tp-3", "name": "twice", "state": "scheduled"}]}`))
	mux.HandleFunc("GET /v1/plans/{id}", reply(plan1))
	mux.HandleFunc("GET /v1/jobs", reply(`{"jobs": [{"id": "job-1", "name": "train", "state": "running"},
		{"id": "job-2", "name": "twice", "state": "failed"}, {"id": "job-3", "name": "twice", "state": "succeeded"}]}`))
	mux.HandleFunc("GET /v1/jobs/{id}", reply(`{"id": "job-1", "name": "train", "state": "running", "command": ["true"]}`))
	mux.HandleFunc("POST /v1/jobs/{id}/stop", reply(`{"id": "job-1", "name": "train", "state": "stopped", "command": ["true"]}`))
	mux.HandleFunc("GET /v1/jobs/{id}/logs", reply(`{"instance": 0, "data": "step 1\n", "next": 7}`))
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		reply(`{"id": "job-9", "name": "eval", "state": "pending", "command": ["true"]}`)(w, r)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

// TestNamesStandForIDs: a command that takes a block, plan or job takes
// its name when no other one has it, looked up in the list; an id is used
// as it is, without a lookup; a name that none or several have is one
// line that says what to give instead.
func TestNamesStandForIDs(t *testing.T) {
	tests := map[string]struct {
		args         []string
		wantCode     int
		wantStderr   string // when not empty
		wantRequests []string
	}{
		"blocks show by name": {
			args:         []string{"blocks", "show", "load-test"},
			wantRequests: []string{"GET /v1/blocks", "GET /v1/blocks/cb-1"},
		},
		"blocks show by id": {
			args:         []string{"blocks", "show", "cb-1"},
			wantRequests: []string{"GET /v1/blocks/cb-1"},
		},
		"blocks status": {
			args:         []string{"blocks", "status", "load-test"},
			wantRequests: []string{"GET /v1/blocks", "GET /v1/blocks/cb-1/status"},
		},
		"blocks cancel": {
			args:         []string{"blocks", "cancel", "load-test", "--yes"},
			wantRequests: []string{"GET /v1/blocks", "GET /v1/blocks/cb-1", "GET /healthz", "GET /v1/policy", "GET /v1/blocks/cb-1/cancel-quote", "POST /v1/blocks/cb-1/cancel", "GET /v1/teams/ml/ledger"},
		},
		"blocks extend": {
			args:         []string{"blocks", "extend", "load-test", "--duration", "24h", "--yes"},
			wantRequests: []string{"GET /v1/blocks", "GET /v1/blocks/cb-1", "GET /v1/blocks/cb-1/extension-offerings?durationHours=24", `POST /v1/blocks/cb-1/extensions {"offeringId":"cbe-ext"}`},
		},
		"blocks: a name no block has": {
			args:         []string{"blocks", "show", "llama"},
			wantCode:     1,
			wantStderr:   "capblock: no block is named \"llama\" (an id starts with cb-; 'capblock blocks list' lists ids and names)\n",
			wantRequests: []string{"GET /v1/blocks"},
		},
		"blocks: a name two blocks have": {
			args:         []string{"blocks", "show", "twice"},
			wantCode:     1,
			wantStderr:   "capblock: 2 blocks are named \"twice\": give the id of one: cb-3 (expired), cb-4 (active)\n",
			wantRequests: []string{"GET /v1/blocks"},
		},
		"blocks: an empty name": {
			args:       []string{"blocks", "show", ""},
			wantCode:   2,
			wantStderr: "capblock: capblock blocks show needs the block id or name, got an empty argument (see 'capblock blocks show --help')\n",
		},
		"plans show by name": {
			args:         []string{"plans", "show", "llama-ft"},
			wantRequests: []string{"GET /v1/plans", "GET /v1/plans/tp-1"},
		},
		"plans: a name two plans have": {
			args:         []string{"plans", "show", "twice"},
			wantCode:     1,
			wantStderr:   "capblock: 2 plans are named \"twice\": give the id of one: tp-2 (expired), tp-3 (scheduled)\n",
			wantRequests: []string{"GET /v1/plans"},
		},
		"jobs run on a plan by name": {
			args:         []string{"jobs", "run", "--plan", "llama-ft", "--name", "eval", "--", "true"},
			wantRequests: []string{"GET /v1/plans", `POST /v1/jobs {"name":"eval","planId":"tp-1","command":["true"]}`},
		},
		"jobs run on a block by name": {
			args:         []string{"jobs", "run", "--block", "load-test", "--", "true"},
			wantRequests: []string{"GET /v1/blocks", `POST /v1/jobs {"blockId":"cb-1","command":["true"]}`},
		},
		"jobs logs by name": {
			args:         []string{"jobs", "logs", "train"},
			wantRequests: []string{"GET /v1/jobs", "GET /v1/jobs/job-1/logs?instance=0&offset=0"},
		},
		"jobs stop": {
			args:         []string{"jobs", "stop", "train", "--yes"},
			wantRequests: []string{"GET /v1/jobs", "GET /v1/jobs/job-1", "POST /v1/jobs/job-1/stop"},
		},
		"jobs: a name no job has": {
			args:         []string{"jobs", "show", "eval"},
			wantCode:     1,
			wantStderr:   "capblock: no job is named \"eval\" (an id starts with job-; 'capblock jobs list' lists ids and names)\n",
			wantRequests: []string{"GET /v1/jobs"},
		},
		"jobs: a name two jobs have": {
			args:         []string{"jobs", "show", "twice"},
			wantCode:     1,
			wantStderr:   "capblock: 2 jobs are named \"twice\": give the id of one: job-2 (failed), job-3 (succeeded)\n",
			wantRequests: []string{"GET /v1/jobs"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url, seen := namesAPI(t)
			got := runApp(t.Context(), nil, append([]string{"--url", url}, tc.args...)...)
			if got.code != tc.wantCode || (tc.wantStderr != "" && got.stderr != tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d, stderr %q", got.code, got.stderr, tc.wantCode, tc.wantStderr)
			}
			if diff := cmp.Diff(tc.wantRequests, seen()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamesInFlags checks that the flags that take an id take a name
// too: --subject a block's, plan's, job's, series' or order's, --team a
// team's, --user a user's; and that a name nothing has is said in one line.
func TestNamesInFlags(t *testing.T) {
	lookups := []string{"GET /v1/blocks", "GET /v1/plans", "GET /v1/jobs", "GET /v1/series", "GET /v1/orders"}
	eventLines := lines(
		"TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA",
		`2026-12-01 00:00  block.active               cb-1                   evt-1                  {"zone":"zone-a"}`,
		"2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2",
	)
	tests := map[string]struct {
		args         []string
		want         result
		wantRequests []string
	}{
		"events --subject a block's name": {
			args:         []string{"events", "--subject", "load-test"},
			want:         result{stdout: eventLines, stderr: "next: capblock events --after c2\n"},
			wantRequests: append(lookups, "GET /v1/events"),
		},
		"events --subject an id": {
			args:         []string{"events", "--subject", "cb-1"},
			want:         result{stdout: eventLines, stderr: "next: capblock events --after c2\n"},
			wantRequests: []string{"GET /v1/events"},
		},
		"events --subject a series' name": {
			args:         []string{"events", "--subject", "workshop"},
			want:         result{stderr: "no events of cs-1\nnext: capblock events --after c2\n"},
			wantRequests: append(lookups, "GET /v1/events"),
		},
		"events --subject a name nothing has": {
			args: []string{"events", "--subject", "nothing"},
			want: result{code: 1, stderr: `capblock: --subject: no block, plan, job, series or order is named "nothing" ` +
				"(an id starts with cb-…, tp-…, job-…, cs-…, ord-…)\n"},
			wantRequests: lookups,
		},
		"buy --team a team's name": {
			args:         []string{"buy", "cbo-first", "--client-token", "tok-1", "--team", "research"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /v1/teams", `POST /v1/blocks {"offeringId":"cbo-first","clientToken":"tok-1","team":"team-1"}`},
		},
		"buy --team a name no team has": {
			args:         []string{"buy", "cbo-first", "--client-token", "tok-1", "--team", "nobody"},
			want:         result{code: 1, stderr: `capblock: --team: no team is named "nobody" (an id starts with team-; 'capblock teams list' lists ids and names)` + "\n"},
			wantRequests: []string{"GET /v1/teams"},
		},
		"tokens create --user a user's name": {
			args:         []string{"tokens", "create", "--user", "ada"},
			want:         result{stdout: "*", stderr: "*"},
			wantRequests: []string{"GET /v1/users", "POST /v1/users/usr-2/tokens {}"},
		},
		"offerings --team a team's name": {
			args: []string{"offerings", "--type", "h100.8x", "--count", "2", "--duration", "48h", "--team", "ops"},
			want: result{stdout: "*", stderr: "*"},
			wantRequests: []string{
				"GET /v1/teams", "GET /v1/instance-types", "GET /healthz",
				"GET /v1/offerings?durationHours=48&endBefore=2026-12-07T09%3A30%3A00Z&instanceCount=2&instanceType=h100.8x&startAfter=2026-11-21T09%3A30%3A00Z&team=team-0"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			checkRun(t, api.URL, api.seen, tc.args, tc.want, tc.wantRequests)
		})
	}
}
