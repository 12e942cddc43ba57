package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chunkedLogs serves a job's output in pieces, one piece a request; the
// job is running until the pieces are all served, then it has ended in
// state final, and one last piece written as it ended is served.
func chunkedLogs(t *testing.T, final string, pieces []string, last string) string {
	t.Helper()
	var (
		mu     sync.Mutex
		served int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs/job-1/logs":
			offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
			data := ""
			switch {
			case served < len(pieces):
				data = pieces[served]
				served++
			case served == len(pieces)+1 && last != "":
				data = last // written between the last read and the end
				served++
			}
			json.NewEncoder(w).Encode(map[string]any{"instance": 0, "data": data, "next": offset + len(data)})
		case "/v1/jobs/job-1":
			state := "running"
			if served >= len(pieces) {
				state, served = final, max(served, len(pieces)+1)
			}
			json.NewEncoder(w).Encode(map[string]any{"id": "job-1", "name": "train", "state": state})
		default:
			problem(w, http.StatusNotFound, "not_found", "no route")
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestJobLogsUntil: --until follows the output until the text appears,
// also across two pieces, and stops there; a job that ends without it is
// an error, decided on its whole output, the last words included.
func TestJobLogsUntil(t *testing.T) {
	tests := map[string]struct {
		args   []string
		pieces []string
		last   string
		want   result
	}{
		"the text in one piece": {
			args:   []string{"--until", "saved step 20"},
			pieces: []string{"step 19\n", "", "step 20\nsaved step 20\n", "step 21\n"},
			want:   result{stdout: "step 19\nstep 20\nsaved step 20\n"},
		},
		"the text across two pieces": {
			args:   []string{"--until", "saved step 20"},
			pieces: []string{"step 20\nsaved st", "ep 20\n", "step 21\n"},
			want:   result{stdout: "step 20\nsaved step 20\n"},
		},
		"the text in the last words": {
			args:   []string{"--until", "done"},
			pieces: []string{"step 1\n"},
			last:   "done\n",
			want:   result{stdout: "step 1\ndone\n"},
		},
		"the job ends without it": {
			args:   []string{"--until", "saved step 99"},
			pieces: []string{"step 1\n", "saved step 1\n"},
			want:   result{code: 1, stdout: "step 1\nsaved step 1\n", stderr: "capblock: job job-1 ended (succeeded) and its output has no \"saved step 99\"\n"},
		},
		"-f prints the last words too": {
			args:   []string{"-f"},
			pieces: []string{"step 1\n", ""},
			last:   "done\n",
			want:   result{stdout: "step 1\ndone\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url := chunkedLogs(t, "succeeded", tc.pieces, tc.last)
			got := runApp(t.Context(), nil, append([]string{"--url", url, "jobs", "logs", "job-1", "--poll", "1ms"}, tc.args...)...)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventsUntil: --until follows the events until one of that type is
// printed, and asks for nothing more.
func TestEventsUntil(t *testing.T) {
	tests := map[string]struct {
		until        string
		want         string
		wantRequests []string
	}{
		"the first": {
			until:        "block.active",
			want:         lines("TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA", "2026-12-01 00:00  block.active               cb-1                   evt-1                  {\"zone\":\"zone-a\"}"),
			wantRequests: []string{"GET /v1/events?wait=30s"},
		},
		"the second": {
			until:        "block.expiration-warning",
			want:         lines("TIME (UTC)        TYPE                       SUBJECT                EVENT                  DATA", "2026-12-01 00:00  block.active               cb-1                   evt-1                  {\"zone\":\"zone-a\"}", "2026-12-02 23:20  block.expiration-warning   cb-1                   evt-2"),
			wantRequests: []string{"GET /v1/events?wait=30s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(t)
			got := runApp(t.Context(), nil, "--url", api.URL, "events", "--until", tc.until)
			if diff := cmp.Diff(result{stdout: tc.want}, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRequests, api.seen()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoginWaitsForAStartingServer: with --wait, login waits for the token
// file to appear and for the server to answer, as after `capblock serve &`;
// without it, a missing file fails at once.
func TestLoginWaitsForAStartingServer(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there until the server starts

	got := runApp(t.Context(), nil, "login", "--url", "http://"+addr, "--token-file", tokenFile)
	if got.code != 1 || !strings.Contains(got.stderr, "no such file") {
		t.Errorf("without --wait: %+v, want the missing file at once", got)
	}

	// The server starts, listens, then writes the token file.
	api := newFakeAPI(t)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		srv := &http.Server{Handler: api.Config.Handler}
		t.Cleanup(func() { srv.Close() })
		go srv.Serve(l)
		time.Sleep(300 * time.Millisecond)
		os.WriteFile(tokenFile, []byte(testToken("A")+"\n"), 0o600)
	}()
	got = runApp(t.Context(), nil, "login", "--url", "http://"+addr, "--token-file", tokenFile, "--wait", "20s")
	if got.code != 0 || !strings.HasPrefix(got.stdout, "logged in to http://"+addr) {
		t.Errorf("with --wait: %+v", got)
	}

	got = runApp(t.Context(), nil, "login", "--url", "http://"+addr, "--token-file", filepath.Join(dir, "none"), "--wait", "300ms")
	if got.code != 1 || !strings.Contains(got.stderr, "no such file") {
		t.Errorf("a file that never comes: %+v, want the missing file after the wait", got)
	}
}

// TestRelativeTimesNeedTheServersClock: a server that does not tell its
// clock answers a relative date with one line that says what to give
// instead; an absolute date needs no clock.
func TestRelativeTimesNeedTheServersClock(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"offerings": []}`))
	}))
	t.Cleanup(srv.Close)
	got := runApp(t.Context(), nil, "--url", srv.URL, "offerings", "--type", "h100.8x", "--duration", "48h", "--start-after", "now")
	want := result{code: 1, stderr: "capblock: reading the server's clock: the server at " + srv.URL +
		" does not tell it (no Capblock-Now header: an older version); give times as dates, e.g. 2026-12-01T10:00:00Z\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	got = runApp(t.Context(), nil, "--url", srv.URL, "offerings", "--type", "h100.8x", "--duration", "48h", "--start-after", "2026-12-01", "--end-before", "2026-12-10")
	if got.code != 0 {
		t.Errorf("absolute dates: %+v", got)
	}
}
