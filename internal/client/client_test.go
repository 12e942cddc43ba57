package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seen is what the fake server received.
type seen struct {
	Method, Path, Query, Auth, Body string
}

// fakeAPI answers every request with status and body, recording it.
func fakeAPI(t *testing.T, status int, body string) (*Client, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*got = seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(b)}
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", WithToken("tok"), WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

var (
	t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	t1 = t0.Add(48 * time.Hour)
)

const blockJSON = `{"id": "cb-1", "name": "load-test", "team": "ml", "instanceType": "h100.8x",
	"gpuModel": "H100", "instanceCount": 2, "zone": "zone-a",
	"startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z",
	"durationHours": 48, "state": "scheduled",
	"upfrontFee": {"amount": "7078.08", "currency": "USD"},
	"createdAt": "2026-11-20T10:00:00Z", "tags": {"env": "prod"}}`

var wantBlock = Block{
	ID: "cb-1", Name: "load-test", Team: "ml", InstanceType: "h100.8x", GPUModel: "H100",
	InstanceCount: 2, Zone: "zone-a", StartTime: t0, EndTime: t1, DurationHours: 48,
	State: "scheduled", UpfrontFee: Money{Amount: "7078.08", Currency: "USD"},
	CreatedAt: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), Tags: map[string]string{"env": "prod"},
}

const offeringJSON = `{"offeringId": "cbo-abc", "instanceType": "h100.8x", "instanceCount": 2,
	"zone": "zone-a", "startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-03T00:00:00Z",
	"durationHours": 48, "upfrontFee": {"amount": "7078.08", "currency": "USD"},
	"onDemandFee": {"amount": "9438.72", "currency": "USD"}, "expiresAt": "2026-11-20T10:10:00Z"}`

var wantOffering = Offering{
	OfferingID: "cbo-abc", InstanceType: "h100.8x", InstanceCount: 2, Zone: "zone-a",
	StartTime: t0, EndTime: t1, DurationHours: 48,
	UpfrontFee: Money{Amount: "7078.08", Currency: "USD"}, OnDemandFee: Money{Amount: "9438.72", Currency: "USD"},
	ExpiresAt: time.Date(2026, 11, 20, 10, 10, 0, 0, time.UTC),
}

func TestCalls(t *testing.T) {
	tests := map[string]struct {
		body     string
		call     func(context.Context, *Client) (any, error)
		want     any
		wantSeen seen
	}{
		"instance types": {
			body: `{"instanceTypes": [{"name": "h100.8x", "gpuModel": "H100", "gpusPerInstance": 8,
				"onDemandPrice": {"amount": "98.32", "currency": "USD"}, "zones": ["zone-a", "zone-b"]}]}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.InstanceTypes(ctx) },
			want: []InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8,
				OnDemandPrice: Money{Amount: "98.32", Currency: "USD"}, Zones: []string{"zone-a", "zone-b"}}},
			wantSeen: seen{Method: "GET", Path: "/v1/instance-types"},
		},
		"nodes": {
			body:     `{"nodes": [{"name": "a-h100-01", "zone": "zone-a", "rack": "a-r1", "gpuModel": "H100", "gpus": 8, "health": "healthy"}]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Nodes(ctx) },
			want:     []Node{{Name: "a-h100-01", Zone: "zone-a", Rack: "a-r1", GPUModel: "H100", GPUs: 8, Health: "healthy"}},
			wantSeen: seen{Method: "GET", Path: "/v1/nodes"},
		},
		"offerings": {
			body: `{"offerings": [` + offeringJSON + `]}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Offerings(ctx, OfferingsQuery{
					InstanceTypes: []string{"h100.8x", "a100.8x"}, InstanceCount: 2, DurationHours: 48,
					StartAfter: t0, EndBefore: t0.Add(14 * 24 * time.Hour), Zone: "zone-a", MaxResults: 3,
				})
			},
			want: []Offering{wantOffering},
			wantSeen: seen{Method: "GET", Path: "/v1/offerings",
				Query: "durationHours=48&endBefore=2026-12-15T00%3A00%3A00Z&instanceCount=2&instanceType=h100.8x&instanceType=a100.8x&maxResults=3&startAfter=2026-12-01T00%3A00%3A00Z&zone=zone-a"},
		},
		"offerings with a duration range": {
			body: `{"offerings": []}`,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Offerings(ctx, OfferingsQuery{InstanceTypes: []string{"l4.1x"}, InstanceCount: 1, MinDurationHours: 4, MaxDurationHours: 8})
			},
			want:     []Offering{},
			wantSeen: seen{Method: "GET", Path: "/v1/offerings", Query: "instanceCount=1&instanceType=l4.1x&maxDurationHours=8&minDurationHours=4"},
		},
		"buy": {
			body: blockJSON,
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.Buy(ctx, BuyRequest{OfferingID: "cbo-abc", ClientToken: "ct-1", Name: "load-test", Tags: map[string]string{"env": "prod"}})
			},
			want:     wantBlock,
			wantSeen: seen{Method: "POST", Path: "/v1/blocks", Body: `{"offeringId":"cbo-abc","clientToken":"ct-1","name":"load-test","tags":{"env":"prod"}}`},
		},
		"blocks": {
			body:     `{"blocks": [` + blockJSON + `]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Blocks(ctx, "scheduled") },
			want:     []Block{wantBlock},
			wantSeen: seen{Method: "GET", Path: "/v1/blocks", Query: "state=scheduled"},
		},
		"block": {
			body:     blockJSON,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Block(ctx, "cb-1") },
			want:     wantBlock,
			wantSeen: seen{Method: "GET", Path: "/v1/blocks/cb-1"},
		},
		"block id is escaped": {
			body:     blockJSON,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.Block(ctx, "a/b?c") },
			want:     wantBlock,
			wantSeen: seen{Method: "GET", Path: "/v1/blocks/a%2Fb%3Fc"},
		},
		"block status": {
			body: `{"totalCapacity": 2, "availableCapacity": 1, "unavailableCapacity": 1, "degraded": true,
				"placementFinal": false, "lockInTime": "2026-11-30T23:00:00Z",
				"placements": [{"node": "a-h100-01", "gpus": [0,1,2,3,4,5,6,7]}]}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.BlockStatus(ctx, "cb-1") },
			want: BlockStatus{TotalCapacity: 2, AvailableCapacity: 1, UnavailableCapacity: 1, Degraded: true,
				LockInTime: t0.Add(-time.Hour), Placements: []Placement{{Node: "a-h100-01", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}},
			wantSeen: seen{Method: "GET", Path: "/v1/blocks/cb-1/status"},
		},
		"cancel": {
			body:     blockJSON,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.CancelBlock(ctx, "cb-1") },
			want:     wantBlock,
			wantSeen: seen{Method: "POST", Path: "/v1/blocks/cb-1/cancel"},
		},
		"extension offerings": {
			body:     `{"offerings": [` + offeringJSON + `]}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.ExtensionOfferings(ctx, "cb-1", 24) },
			want:     []Offering{wantOffering},
			wantSeen: seen{Method: "GET", Path: "/v1/blocks/cb-1/extension-offerings", Query: "durationHours=24"},
		},
		"extend": {
			body:     blockJSON,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.ExtendBlock(ctx, "cb-1", "cbe-x") },
			want:     wantBlock,
			wantSeen: seen{Method: "POST", Path: "/v1/blocks/cb-1/extensions", Body: `{"offeringId":"cbe-x"}`},
		},
		"events": {
			body: `{"events": [{"id": "evt-1", "time": "2026-12-01T00:00:00Z", "type": "block.active",
				"subject": "cb-1", "team": "ml", "data": {"zone": "zone-a"}}], "next": "c2"}`,
			call: func(ctx context.Context, c *Client) (any, error) { return c.Events(ctx, "c1", 30*time.Second) },
			want: EventPage{Events: []Event{{ID: "evt-1", Time: t0, Type: "block.active", Subject: "cb-1", Team: "ml",
				Data: map[string]any{"zone": "zone-a"}}}, Next: "c2"},
			wantSeen: seen{Method: "GET", Path: "/v1/events", Query: "after=c1&wait=30s"},
		},
		"advance clock": {
			body:     `{"now": "2026-12-01T06:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.AdvanceClock(ctx, 6*time.Hour) },
			want:     Clock{Now: t0.Add(6 * time.Hour)},
			wantSeen: seen{Method: "POST", Path: "/v1/admin/clock", Body: `{"advance":"6h0m0s"}`},
		},
		"set clock": {
			body:     `{"now": "2026-12-01T00:00:00Z"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.SetClock(ctx, t0) },
			want:     Clock{Now: t0},
			wantSeen: seen{Method: "POST", Path: "/v1/admin/clock", Body: `{"now":"2026-12-01T00:00:00Z"}`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, got := fakeAPI(t, http.StatusOK, tc.body)
			v, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(tc.want, v); diff != "" {
				t.Errorf("decoded mismatch (-want +got):\n%s", diff)
			}
			tc.wantSeen.Auth = "Bearer tok"
			if diff := cmp.Diff(tc.wantSeen, *got); diff != "" {
				t.Errorf("request mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	tests := map[string]struct {
		status   int
		body     string
		want     *Problem
		wantText string
	}{
		"no capacity": {
			status: 409,
			body:   `{"type": "about:blank", "title": "Not enough capacity", "status": 409, "code": "no_capacity", "detail": "only 3 of 4 h100.8x free from 2026-12-01T00:00:00Z"}`,
			want: &Problem{Type: "about:blank", Title: "Not enough capacity", Status: 409, Code: "no_capacity",
				Detail: "only 3 of 4 h100.8x free from 2026-12-01T00:00:00Z"},
			wantText: "no_capacity: only 3 of 4 h100.8x free from 2026-12-01T00:00:00Z",
		},
		"the server's own wrapping is left out": {
			status: 409,
			body:   `{"title": "Conflict", "status": 409, "code": "invalid_state", "detail": "changing block cb-1: invalid state: block cb-1 is cancelled; only scheduled or active blocks can be extended"}`,
			want: &Problem{Title: "Conflict", Status: 409, Code: "invalid_state",
				Detail: "changing block cb-1: invalid state: block cb-1 is cancelled; only scheduled or active blocks can be extended"},
			wantText: "invalid_state: block cb-1 is cancelled; only scheduled or active blocks can be extended",
		},
		"a reason inside the why stays": {
			status:   409,
			body:     `{"title": "Conflict", "status": 409, "code": "offering_used", "detail": "offering already used: this quote already bought a block (a quote buys one): search again"}`,
			want:     &Problem{Title: "Conflict", Status: 409, Code: "offering_used", Detail: "offering already used: this quote already bought a block (a quote buys one): search again"},
			wantText: "offering_used: this quote already bought a block (a quote buys one): search again",
		},
		"title when no detail": {
			status:   404,
			body:     `{"title": "Not Found", "status": 404, "code": "not_found"}`,
			want:     &Problem{Title: "Not Found", Status: 404, Code: "not_found"},
			wantText: "not_found: Not Found",
		},
		"multi-line detail is one line": {
			status:   400,
			body:     `{"title": "Bad", "code": "invalid_argument", "detail": "line one\nline two"}`,
			want:     &Problem{Title: "Bad", Status: 400, Code: "invalid_argument", Detail: "line one\nline two"},
			wantText: "invalid_argument: line one line two",
		},
		"field errors": {
			status: 422,
			body:   `{"title": "Unprocessable Entity", "status": 422, "detail": "validation failed", "errors": [{"message": "expected integer", "location": "query.instanceCount"}]}`,
			want: &Problem{Title: "Unprocessable Entity", Status: 422, Detail: "validation failed",
				Errors: []FieldProblem{{Message: "expected integer", Location: "query.instanceCount"}}},
			wantText: "HTTP 422: validation failed (query.instanceCount: expected integer)",
		},
		"not a problem": {
			status:   502,
			body:     "<html>\nBad gateway\n</html>",
			want:     &Problem{Title: "Bad Gateway", Status: 502, Detail: "<html>\nBad gateway\n</html>"},
			wantText: "HTTP 502: <html> Bad gateway </html>",
		},
		"empty body": {
			status:   500,
			want:     &Problem{Title: "Internal Server Error", Status: 500},
			wantText: "HTTP 500: Internal Server Error",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, _ := fakeAPI(t, tc.status, tc.body)
			_, err := c.Block(t.Context(), "cb-1")
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("error %v (%T) is not a *Problem", err, err)
			}
			if diff := cmp.Diff(tc.want, p); diff != "" {
				t.Errorf("problem mismatch (-want +got):\n%s", diff)
			}
			if got := p.Error(); got != tc.wantText {
				t.Errorf("Problem.Error() = %q, want %q", got, tc.wantText)
			}
			want := tc.wantText // the server's problem names what failed
			if tc.want.Code == "" {
				want = "getting block cb-1: " + tc.wantText // a proxy's answer does not
			}
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			if got := ProblemCode(err); got != tc.want.Code {
				t.Errorf("ProblemCode = %q, want %q", got, tc.want.Code)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.InstanceTypes(t.Context())
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("error %v does not wrap ErrUnreachable", err)
	}
	want := "listing instance types: the capblock server is not reachable at " + url +
		" (connection refused); start it with `capblock serve` or set --url or CAPBLOCK_URL to its address"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

func TestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, WithTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Nodes(t.Context())
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *TimeoutError", err, err)
	}
	if !strings.Contains(err.Error(), "did not answer within 20ms") {
		t.Errorf("error = %q, want it to say how long it waited", err)
	}
}

func TestCancelledContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.Events(ctx, "", 30*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestClockFallsBackToPost(t *testing.T) {
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods = append(methods, r.Method)
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var body map[string]string
		json.NewDecoder(r.Body).Decode(&body)
		if body["advance"] != "0s" {
			t.Errorf("POST body = %v, want advance 0s", body)
		}
		io.WriteString(w, `{"now": "2026-12-01T00:00:00Z"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	clk, err := c.Clock(t.Context())
	if err != nil {
		t.Fatalf("Clock: %v", err)
	}
	if !clk.Now.Equal(t0) {
		t.Errorf("Clock = %v, want %v", clk.Now, t0)
	}
	if diff := cmp.Diff([]string{"GET", "POST"}, methods); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "::"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) succeeded, want an error", u)
		}
	}
	c, err := New("https://capblock.example.com/api/?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.BaseURL(), "https://capblock.example.com/api"; got != want {
		t.Errorf("BaseURL = %q, want %q", got, want)
	}
}

// TestNowReadsTheServersClock: Now asks GET /healthz and returns the time
// in its Capblock-Now header; a server without the header, or with one
// that is not a time, is an error that says what to do instead.
func TestNowReadsTheServersClock(t *testing.T) {
	tests := map[string]struct {
		header  string
		want    time.Time
		wantErr string
	}{
		"simulated":       {header: "2026-12-01T00:00:00Z", want: t0},
		"with a fraction": {header: "2026-12-01T02:00:00.5+02:00", want: t0.Add(500 * time.Millisecond)},
		"no header":       {wantErr: "reading the server's clock: the server at URL does not tell it (no Capblock-Now header: an older version); give times as dates, e.g. 2026-12-01T10:00:00Z"},
		"not a time":      {header: "tomorrow", wantErr: `reading the server's clock: Capblock-Now "tomorrow" is not an RFC 3339 time`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var paths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				paths = append(paths, r.Method+" "+r.URL.Path)
				if tc.header != "" {
					w.Header().Set(NowHeader, tc.header)
				}
				io.WriteString(w, `{"status": "ok"}`)
			}))
			t.Cleanup(srv.Close)
			c, err := New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Now(t.Context())
			if tc.wantErr != "" {
				if err == nil || strings.ReplaceAll(err.Error(), srv.URL, "URL") != tc.wantErr {
					t.Errorf("Now = %v, %v; want the error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Errorf("Now = %v, %v; want %v in UTC", got, err, tc.want)
			}
			if diff := cmp.Diff([]string{"GET /healthz"}, paths); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}
