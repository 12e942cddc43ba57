// Package e2e tests capblock end to end: the real HTTP handler, service,
// SQLite store and sim backend, or the built binary as a separate process.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"capblock/internal/api"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/console"
	"capblock/internal/fleet"
	"capblock/internal/seal"
	"capblock/internal/service"
	"capblock/internal/store/sqlite"
	"capblock/internal/testproc"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// testFleet is one zone with a rack of 8 H100 nodes and 2 L4 nodes.
const testFleet = `
currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
  - {name: l4.1x, gpuModel: L4, gpusPerInstance: 1, onDemandPrice: "1.00"}
zones:
  - name: zone-a
    racks:
      - name: r1
        nodeGroups:
          - {prefix: h100-, count: 8, gpuModel: H100, gpus: 8}
      - name: r2
        nodeGroups:
          - {prefix: l4-, count: 2, gpuModel: L4, gpus: 4}
`

type env struct {
	t     *testing.T
	team  string // the admin's team, which its purchases go to
	url   string
	db    string
	store *sqlite.Store
	svc   *service.Service
	sim   *clock.Sim
	key   *seal.Key // the server's secrets key
}

// start runs the real stack on a fresh SQLite file with a simulated clock
// at t0.
func start(t *testing.T) *env {
	t.Helper()
	return startFleet(t, testFleet)
}

// startFleet is start on a fleet file of the test's own.
func startFleet(t *testing.T, fleetYAML string) *env {
	t.Helper()
	e, _ := startWith(t, fleetYAML, service.Config{JobsDir: "jobs", AllowPrivateWebhooks: true}, api.Options{}) // receivers on loopback
	return e
}

// startWith runs the real stack on fleetYAML, a fresh SQLite file and a
// simulated clock at t0, with the service options of cfg (a JobsDir
// relative to the test's directory) and the API options of opts; it
// returns the env and the API's handler.
func startWith(t *testing.T, fleetYAML string, cfg service.Config, opts api.Options) (*env, http.Handler) {
	t.Helper()
	ctx := context.Background()
	f, err := fleet.Parse([]byte(fleetYAML))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "capblock.db")
	// The jobs' shims outlive the service by design (a next server adopts
	// them): the test ends them, before its folder goes.
	t.Cleanup(func() { testproc.KillUnder(filepath.Dir(db)) })
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sim := clock.NewSim(t0)
	cfg.Fleet, cfg.Store, cfg.Backend, cfg.Clock, cfg.Log = f, st, local.NewSim(discard(), f.Nodes), sim, discard()
	if cfg.JobsDir != "" {
		cfg.JobsDir = filepath.Join(filepath.Dir(db), cfg.JobsDir)
	}
	if cfg.SecretsKey == nil {
		cfg.SecretsKey = seal.Generate()
	}
	svc, err := service.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokenPath := filepath.Join(filepath.Dir(db), "admin.token")
	if _, err := svc.Bootstrap(ctx, tokenPath); err != nil {
		t.Fatal(err)
	}
	opts.Logger = discard()
	if opts.Console == nil {
		opts.Console = console.Handler()
	}
	h := api.New(svc.Guarded(), opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	useToken(t, srv.URL, tokenPath)
	e := &env{t: t, url: srv.URL, db: db, store: st, svc: svc, sim: sim, key: cfg.SecretsKey}
	e.team = e.whoami().Team
	return e, h
}

// tokens holds the admin token of each server under test, by URL.
var tokens sync.Map

// useToken makes call send the token in file to the server at url.
func useToken(t testing.TB, url, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the admin token: %v", err)
	}
	tokens.Store(url, strings.TrimSpace(string(data)))
}

// whoami returns the admin user that the env acts as.
func (e *env) whoami() user {
	e.t.Helper()
	var out struct {
		User user `json:"user"`
	}
	if code := call(e.t, e.url, "GET", "/v1/whoami", nil, &out); code != 200 || out.User.ID == "" {
		e.t.Fatalf("whoami: status %d", code)
	}
	return out.User
}

type user struct {
	ID   string `json:"id"`
	Team string `json:"team"`
	Role string `json:"role"`
}

// call sends a JSON request and decodes the JSON answer into out (when not
// nil); it returns the status code. It authenticates with the server's
// admin token, or with token when given ("-" for none).
func call(t testing.TB, base, method, path string, body, out any, token ...string) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case len(token) > 0 && token[0] == "-":
	case len(token) > 0:
		req.Header.Set("Authorization", "Bearer "+token[0])
	default:
		if tok, ok := tokens.Load(base); ok {
			req.Header.Set("Authorization", "Bearer "+tok.(string))
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

type money struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

type offering struct {
	OfferingID    string    `json:"offeringId"`
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	Zone          string    `json:"zone"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	DurationHours int       `json:"durationHours"`
	UpfrontFee    money     `json:"upfrontFee"`
}

type block struct {
	ID            string    `json:"id"`
	State         string    `json:"state"`
	InstanceCount int       `json:"instanceCount"`
	StartTime     time.Time `json:"startTime"`
	EndTime       time.Time `json:"endTime"`
	UpfrontFee    money     `json:"upfrontFee"`
}

type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Subject string `json:"subject"`
}

// offerings searches and returns the offerings, failing the test on error.
func (e *env) offerings(query string) []offering {
	e.t.Helper()
	var out struct {
		Offerings []offering `json:"offerings"`
	}
	if code := call(e.t, e.url, "GET", "/v1/offerings?"+query, nil, &out); code != 200 {
		e.t.Fatalf("search %s: status %d", query, code)
	}
	return out.Offerings
}

// exact returns the offering of the given duration starting at start.
func (e *env) exact(query string, hours int, start time.Time) offering {
	e.t.Helper()
	for _, o := range e.offerings(query) {
		if o.DurationHours == hours && o.StartTime.Equal(start) {
			return o
		}
	}
	e.t.Fatalf("no %dh offering starting %s for %s", hours, start, query)
	return offering{}
}

// quotes searches n times and returns, from each search, the offering of
// the given duration starting at start. A quote buys once, so buyers that
// race for the same terms each need one of their own.
func (e *env) quotes(n int, query string, hours int, start time.Time) []offering {
	e.t.Helper()
	out := make([]offering, n)
	for i := range out {
		out[i] = e.exact(query, hours, start)
	}
	return out
}

func (e *env) buy(offeringID, token string) (block, int) {
	e.t.Helper()
	var b block
	code := call(e.t, e.url, "POST", "/v1/blocks", map[string]any{"offeringId": offeringID, "clientToken": token}, &b)
	return b, code
}

func (e *env) advance(d time.Duration) {
	e.t.Helper()
	if code := call(e.t, e.url, "POST", "/v1/admin/clock", map[string]any{"advance": d.String()}, nil); code != 200 {
		e.t.Fatalf("advancing the clock: status %d", code)
	}
}

func (e *env) events() []event {
	e.t.Helper()
	var out struct {
		Events []event `json:"events"`
	}
	if code := call(e.t, e.url, "GET", "/v1/events", nil, &out); code != 200 {
		e.t.Fatalf("events: status %d", code)
	}
	return out.Events
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func searchQuery(typ string, count, hours int, after, before time.Time) string {
	return fmt.Sprintf("instanceType=%s&instanceCount=%d&durationHours=%d&startAfter=%s&endBefore=%s", typ, count, hours, ts(after), ts(before))
}

// postBlock buys an offering and returns the block id and status, or an
// error when the server cannot be reached or cuts its answer off (not
// acknowledged).
func postBlock(base, offeringID, token string) (string, int, error) {
	id, status, _, _, err := postBlockProblem(base, offeringID, token)
	return id, status, err
}

// postBlockProblem buys an offering and returns the block id, the status
// and, for a refusal, the problem's code and detail.
func postBlockProblem(base, offeringID, token string) (id string, status int, code, detail string, err error) {
	return postBlockWith(http.DefaultClient, base, offeringID, token)
}

// postBlockWith is postBlockProblem through client.
func postBlockWith(client *http.Client, base, offeringID, token string) (id string, status int, code, detail string, err error) {
	body, _ := json.Marshal(map[string]any{"offeringId": offeringID, "clientToken": token})
	req, _ := http.NewRequest("POST", base+"/v1/blocks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok, ok := tokens.Load(base); ok {
		req.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, "", "", err
	}
	defer resp.Body.Close()
	var out struct{ ID, Code, Detail string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", 0, "", "", err
	}
	return out.ID, resp.StatusCode, out.Code, out.Detail, nil
}

// eventsWithData returns every event with its data.
func (e *env) eventsWithData() []struct {
	Type    string         `json:"type"`
	Subject string         `json:"subject"`
	Data    map[string]any `json:"data"`
} {
	e.t.Helper()
	var out struct {
		Events []struct {
			Type    string         `json:"type"`
			Subject string         `json:"subject"`
			Data    map[string]any `json:"data"`
		} `json:"events"`
	}
	if code := call(e.t, e.url, "GET", "/v1/events", nil, &out); code != 200 {
		e.t.Fatalf("events: status %d", code)
	}
	return out.Events
}

// runCLI runs the capblock binary bin against the server at url with
// token, stdin empty (a pipe: no terminal to answer), and returns its
// stdout, stderr and exit code.
func runCLI(t testing.TB, bin, url, token string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--url", url, "--token", strings.TrimSpace(token)}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &out, &errOut
	err := cmd.Run()
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
