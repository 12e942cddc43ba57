package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"capblock/internal/auth"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
)

// t0 is the fake's "now": offerings and blocks are built around it.
var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

// fakeService is an in-memory Service: a fixed fleet, a list of offerings
// that can be bought, and blocks kept in a map. It records what the API
// passed to it, and fails every call with err when err is set.
type fakeService struct {
	// Front makes the fake satisfy the interface; the teams, users,
	// tokens and ledger methods it leaves out are exercised end to end,
	// and so is the service's access check, which the fake leaves out.
	contract.Front

	mu        sync.Mutex
	fleet     core.Fleet
	slots     []core.Slot
	offerings []core.Offering
	blocks    map[string]core.Block
	tokens    map[string]contract.PurchaseRequest // client token → first request
	byToken   map[string]string                   // client token → block id
	events    []core.Event
	status    contract.BlockStatus
	err       error
	ready     error
	panicMsg  string
	clock     *fakeClock
	health    map[string]core.NodeHealth // the nodes' records (nodes_test.go)

	// What the last call received.
	gotTeam     string
	gotSearch   core.SearchRequest
	gotPurchase contract.PurchaseRequest
	gotState    core.BlockState
	gotDuration time.Duration
	gotAfter    string
	gotWait     time.Duration
	gotAvail    []any
	gotReason   string
}

func newFake() *fakeService {
	return &fakeService{
		fleet: core.Fleet{
			Nodes: []core.Node{
				{Name: "n1", Zone: "zone-b", Rack: "r1", GPUModel: "H100", GPUs: 8, Health: core.Healthy, Labels: map[string]string{"ib": "yes"}},
				{Name: "n2", Zone: "zone-a", Rack: "r2", GPUModel: "H100", GPUs: 8, Health: core.Unhealthy},
				{Name: "n3", Zone: "zone-a", Rack: "r3", GPUModel: "L4", GPUs: 4, Health: core.Healthy},
			},
			Types: []core.InstanceType{
				{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9850, Currency: "USD"},
					AWSNames: []string{"p5.48xlarge", "ml.p5.48xlarge"}},
				{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 70, Currency: "USD"}},
				{Name: "a100.8x", GPUModel: "A100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 400000, Currency: "USD"}},
			},
			Currency: "USD",
			Limits:   core.DefaultLimits(),
		},
		offerings: []core.Offering{testOffering()},
		blocks:    map[string]core.Block{},
		tokens:    map[string]contract.PurchaseRequest{},
		byToken:   map[string]string{},
	}
}

func testOffering() core.Offering {
	return core.Offering{
		ID: "cbo-abc.sig", Kind: core.KindBlock, InstanceType: "h100.8x", Count: 2, Zone: "zone-a",
		Start: t0.Add(24 * time.Hour), End: t0.Add(72 * time.Hour),
		Fee:         core.Money{Minor: 123456, Currency: "USD"},
		OnDemandFee: core.Money{Minor: 945600, Currency: "USD"},
		ExpiresAt:   t0.Add(10 * time.Minute),
	}
}

func testBlock() core.Block {
	return core.Block{
		ID: "cb-1", Name: "load test", Team: "default", InstanceType: "h100.8x", GPUModel: "H100", Count: 2,
		Zone: "zone-a", Start: t0.Add(24 * time.Hour), End: t0.Add(72 * time.Hour), State: core.StateScheduled,
		Fee: core.Money{Minor: 123456, Currency: "USD"}, CreatedAt: t0.Add(1500 * time.Millisecond),
		Tags: map[string]string{"env": "prod"},
	}
}

// fail runs before every call: the configured error or panic, if any.
func (f *fakeService) fail() error {
	if f.panicMsg != "" {
		panic(f.panicMsg)
	}
	return f.err
}

func (f *fakeService) Fleet(context.Context) (core.Fleet, error) { return f.fleet, nil }

func (f *fakeService) WhoAmI(ctx context.Context) (core.Principal, error) {
	p, _ := contract.PrincipalOf(ctx)
	return p, nil
}

func (f *fakeService) Availability(_ context.Context, instanceType, zone string, from, to time.Time) ([]core.Slot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotAvail = []any{instanceType, zone, from, to}
	return f.slots, f.fail()
}

func (f *fakeService) Offerings(_ context.Context, req core.SearchRequest) ([]core.Offering, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotSearch = req
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.offerings, nil
}

func (f *fakeService) Purchase(_ context.Context, req contract.PurchaseRequest) (core.Block, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotPurchase = req
	if err := f.fail(); err != nil {
		return core.Block{}, false, err
	}
	if first, ok := f.tokens[req.ClientToken]; ok {
		if first.OfferingID != req.OfferingID {
			return core.Block{}, false, fmt.Errorf("purchasing: %w", core.ErrIdempotencyMismatch)
		}
		return f.blocks[f.byToken[req.ClientToken]], false, nil
	}
	for _, o := range f.offerings {
		if o.ID != req.OfferingID {
			continue
		}
		b := core.Block{
			ID: fmt.Sprintf("cb-%d", len(f.blocks)+1), Name: req.Name, Team: req.Team, InstanceType: o.InstanceType,
			GPUModel: "H100", Count: o.Count, Zone: o.Zone, Start: o.Start, End: o.End, State: core.StateScheduled,
			Fee: o.Fee, CreatedAt: t0, Tags: req.Tags,
		}
		f.blocks[b.ID] = b
		f.tokens[req.ClientToken] = req
		f.byToken[req.ClientToken] = b.ID
		return b, true, nil
	}
	return core.Block{}, false, fmt.Errorf("purchasing %s: %w", req.OfferingID, core.ErrOfferingInvalid)
}

func (f *fakeService) block(team, id string) (core.Block, error) {
	f.gotTeam = team
	if err := f.fail(); err != nil {
		return core.Block{}, err
	}
	b, ok := f.blocks[id]
	if !ok || b.Team != team {
		return core.Block{}, fmt.Errorf("block %s: %w", id, core.ErrNotFound)
	}
	return b, nil
}

func (f *fakeService) ListBlocks(_ context.Context, team string, state core.BlockState) ([]core.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotTeam, f.gotState = team, state
	if err := f.fail(); err != nil {
		return nil, err
	}
	var out []core.Block
	for _, b := range f.blocks {
		if b.Team == team && (state == "" || b.State == state) {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeService) GetBlock(_ context.Context, team, id string) (core.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.block(team, id)
}

// BlockDetail shows a block of the fake with no hand-overs and nothing
// used yet.
func (f *fakeService) BlockDetail(_ context.Context, team, id string) (contract.BlockDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.block(team, id); err != nil {
		return contract.BlockDetail{}, err
	}
	return contract.BlockDetail{}, nil
}

func (f *fakeService) CancelBlock(_ context.Context, team, id string) (core.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.block(team, id)
	if err != nil {
		return b, err
	}
	b.State = core.StateCancelled
	f.blocks[id] = b
	return b, nil
}

func (f *fakeService) ExtensionOfferings(_ context.Context, team, id string, d time.Duration) ([]core.Offering, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotDuration = d
	b, err := f.block(team, id)
	if err != nil {
		return nil, err
	}
	return []core.Offering{{
		ID: "cbe-ext.sig", Kind: core.KindExtension, BlockID: id, InstanceType: b.InstanceType, Count: b.Count,
		Zone: b.Zone, Start: b.End, End: b.End.Add(d), Fee: core.Money{Minor: 500, Currency: "USD"},
		OnDemandFee: core.Money{Minor: 900, Currency: "USD"}, ExpiresAt: t0.Add(10 * time.Minute),
	}}, nil
}

func (f *fakeService) Extend(_ context.Context, team, id, offeringID string) (contract.Extension, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.block(team, id)
	if err != nil {
		return contract.Extension{}, err
	}
	if offeringID != "cbe-ext.sig" {
		return contract.Extension{}, fmt.Errorf("extending block %s: %w", id, core.ErrOfferingInvalid)
	}
	x := contract.Extension{OfferingID: offeringID, Start: b.End, End: b.End.Add(2 * time.Hour), Fee: core.Money{Minor: 500, Currency: "USD"}, PurchasedAt: t0}
	b.End = x.End
	f.blocks[id] = b
	x.Block = b
	return x, nil
}

func (f *fakeService) BlockStatus(_ context.Context, team, id string) (contract.BlockStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.block(team, id); err != nil {
		return contract.BlockStatus{}, err
	}
	return f.status, nil
}

func (f *fakeService) Events(_ context.Context, team, after string, wait time.Duration) ([]core.Event, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gotTeam, f.gotAfter, f.gotWait = team, after, wait
	if err := f.fail(); err != nil {
		return nil, "", err
	}
	return f.events, "c-2", nil
}

func (f *fakeService) Ready(context.Context) error { return f.ready }

func (f *fakeService) SimClock() contract.SimClock {
	if f.clock == nil {
		return nil // a nil *fakeClock in the interface would not be nil
	}
	return f.clock
}

func (f *fakeService) Simulated() bool { return f.SimClock() != nil }
func (f *fakeService) Now() time.Time  { return nowOf(f.SimClock()) }
func (f *fakeService) Clock(context.Context) (time.Time, error) {
	return clockOf(f.SimClock())
}
func (f *fakeService) SetClock(_ context.Context, req contract.ClockRequest) (time.Time, error) {
	return setClockOf(f.SimClock(), req)
}

// nowOf, clockOf and setClockOf answer as the service does with sim, a
// simulated clock, or nil for the wall clock.
func nowOf(sim contract.SimClock) time.Time {
	if sim == nil {
		return time.Now()
	}
	return sim.Now()
}

func clockOf(sim contract.SimClock) (time.Time, error) {
	if sim == nil {
		return time.Time{}, core.ErrNotFound
	}
	return sim.Now(), nil
}

func setClockOf(sim contract.SimClock, req contract.ClockRequest) (time.Time, error) {
	if sim == nil {
		return time.Time{}, core.ErrNotFound
	}
	now, err := req.Apply(sim)
	if errors.Is(err, clock.ErrOutOfRange) {
		return now, core.Invalidf("%s", err)
	}
	return now, err
}

// fakeClock is a SimClock that refuses to go back in time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now, nil
}

func (c *fakeClock) Set(t time.Time) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		return c.now, core.Invalidf("the clock cannot go back from %s to %s", c.now.Format(time.RFC3339), t.Format(time.RFC3339))
	}
	c.now = t
	return c.now, nil
}

// testAPI is the handler under test with what it writes to.
type testAPI struct {
	handler  http.Handler
	fake     *fakeService
	logs     *bytes.Buffer
	registry *prometheus.Registry
}

// memberToken is a member of team "default"; adminToken an admin.
var (
	memberToken, _ = auth.New()
	adminToken, _  = auth.New()
)

func (f *fakeService) Authenticate(_ context.Context, token string) (core.Principal, error) {
	if token == adminToken {
		return core.Principal{User: core.User{ID: "usr-admin", Name: "admin", Team: "team-ops", Role: core.RoleAdmin}, TokenID: "tok-admin"}, nil
	}
	return core.Principal{User: core.User{ID: "usr-ada", Name: "ada", Team: "default", Role: core.RoleMember}, TokenID: "tok-ada"}, nil
}

func (f *fakeService) RecordAudit(context.Context, core.AuditRecord) {}

func newTestAPI(t testing.TB, fake *fakeService, opts Options) *testAPI {
	t.Helper()
	logs := &bytes.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	return &testAPI{handler: recordProblems(fake, New(fake, opts)), fake: fake, logs: logs, registry: opts.Registry}
}

// response is what a request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (a *testAPI) do(t testing.TB, method, target, body string) response {
	t.Helper()
	return a.doWith(t, method, target, body, "application/json")
}

// doAs sends a request with the given token.
func (a *testAPI) doAs(t testing.TB, token, method, target, body string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// doWith sends body, if any, as contentType.
func (a *testAPI) doWith(t testing.TB, method, target, body, contentType string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	// The admin routes are called as an admin, everything else as a member.
	token := memberToken
	if strings.HasPrefix(target, "/v1/admin/") {
		token = adminToken
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	a.handler.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// json decodes the body into generic JSON values.
func (r response) json(t *testing.T) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.body)
	}
	return v
}

// problem decodes an error response, checking that it is one.
func (r response) problem(t *testing.T) Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != problemJSON {
		t.Errorf("Content-Type = %q, want %q; body %s", ct, problemJSON, r.body)
	}
	var p Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("body is not a problem: %v\n%s", err, r.body)
	}
	if p.Type != "about:blank" || p.Title == "" || p.Status != r.status || p.Code == "" || p.Detail == "" {
		t.Errorf("incomplete problem for status %d: %+v", r.status, p)
	}
	return p
}

// parseJSON parses a literal expected body.
func parseJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expected JSON: %v\n%s", err, s)
	}
	return v
}

// wantProblem is an expected error: status, code and words of the detail.
type wantProblem struct {
	status int
	code   string
	detail string // a substring of the detail
}

func checkProblem(t *testing.T, r response, want wantProblem) {
	t.Helper()
	p := r.problem(t)
	if r.status != want.status || p.Code != want.code {
		t.Errorf("got %d %s, want %d %s; detail %q", r.status, p.Code, want.status, want.code, p.Detail)
	}
	if !strings.Contains(p.Detail, want.detail) {
		t.Errorf("detail %q does not contain %q", p.Detail, want.detail)
	}
}

func checkJSON(t *testing.T, r response, wantStatus int, want string) {
	t.Helper()
	if r.status != wantStatus {
		t.Fatalf("status = %d, want %d; body %s", r.status, wantStatus, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if diff := cmp.Diff(parseJSON(t, want), r.json(t)); diff != "" {
		t.Errorf("body mismatch (-want +got):\n%s", diff)
	}
}
