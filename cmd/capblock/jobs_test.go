package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// jobsServer answers the job routes with canned JSON and records what it
// was asked.
func jobsServer(t *testing.T) (url string, seen func() []string) {
	t.Helper()
	var (
		mu  sync.Mutex
		log []string
	)
	job := `{"id": "job-1", "name": "train", "team": "team-1", "blockId": "cb-1", "command": ["python", "train.py"], "env": {"SEED": "7"},
		"instanceCount": 2, "maxRestarts": 2, "state": "%s", "restarts": 1, "createdAt": "2026-12-01T00:00:00Z"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/jobs" && r.Method == "POST":
			w.WriteHeader(201)
			io.WriteString(w, strings.Replace(job, "%s", "pending", 1))
		case r.URL.Path == "/v1/jobs/job-1/logs":
			data := ""
			if r.URL.Query().Get("offset") == "0" {
				data = "step 1\nstep 2\n"
			}
			json.NewEncoder(w).Encode(map[string]any{"instance": 1, "data": data, "next": 14})
		case r.URL.Path == "/v1/jobs/job-1":
			io.WriteString(w, strings.Replace(job, "%s", "succeeded", 1))
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			io.WriteString(w, `{"type": "about:blank", "title": "Not found", "status": 404, "code": "not_found", "detail": "no route"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func TestJobsCommands(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	url, seen := jobsServer(t)
	env := map[string]string{"CAPBLOCK_URL": url, "CAPBLOCK_TOKEN": testToken("A")}

	got := runApp(t.Context(), env, "jobs", "run", "--block", "cb-1", "--env", "SEED=7", "--max-restarts", "2", "--", "python", "train.py")
	if got.code != 0 || !strings.Contains(got.stdout, "state:     pending") {
		t.Fatalf("jobs run: %+v", got)
	}
	if want := `POST /v1/jobs {"blockId":"cb-1","command":["python","train.py"],"env":{"SEED":"7"},"maxRestarts":2}`; seen()[0] != want {
		t.Errorf("jobs run sent %q, want %q", seen()[0], want)
	}
	got = runApp(t.Context(), env, "jobs", "run", "--preemptible", "--type", "h100.1x", "--instances", "2", "--", "python", "sweep.py")
	if got.code != 0 {
		t.Fatalf("jobs run --preemptible: %+v", got)
	}
	if want := `POST /v1/jobs {"command":["python","sweep.py"],"instanceCount":2,"preemptible":true,"instanceType":"h100.1x"}`; seen()[1] != want {
		t.Errorf("jobs run --preemptible sent %q, want %q", seen()[1], want)
	}
	got = runApp(t.Context(), env, "jobs", "logs", "job-1", "--instance", "1", "-f", "--poll", "1ms")
	if got.code != 0 || got.stdout != "step 1\nstep 2\n" {
		t.Fatalf("jobs logs -f: %+v", got)
	}
	for name, args := range map[string][]string{
		"no block":                 {"jobs", "run", "--", "true"},
		"no command":               {"jobs", "run", "--block", "cb-1"},
		"bad env":                  {"jobs", "run", "--block", "cb-1", "--env", "SEED", "--", "true"},
		"preemptible on a block":   {"jobs", "run", "--preemptible", "--type", "h100.1x", "--block", "cb-1", "--", "true"},
		"preemptible, no type":     {"jobs", "run", "--preemptible", "--", "true"},
		"type without preemptible": {"jobs", "run", "--block", "cb-1", "--type", "h100.1x", "--", "true"},
		"lend, neither on nor off": {"blocks", "lend", "cb-1"},
		"lend, both on and off":    {"blocks", "lend", "cb-1", "--on", "--off"},
	} {
		if got := runApp(t.Context(), env, args...); got.code != 2 || !strings.HasPrefix(got.stderr, "capblock: ") || strings.Count(got.stderr, "\n") != 1 {
			t.Errorf("%s: %+v, want one usage line and exit 2", name, got)
		}
	}
	if got := runApp(t.Context(), env, "jobs", "show", "job-2"); got.code != 1 || !strings.Contains(got.stderr, "not_found") {
		t.Errorf("an unknown job: %+v", got)
	}
}
