package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rateLimitedAPI answers the first limited requests with 429 and
// retryAfter (no header when empty), then with body. It records the
// requests and the client's waits.
func rateLimitedAPI(t *testing.T, limited int, retryAfter, body string) (*Client, *[]string, *[]time.Duration) {
	t.Helper()
	var (
		mu       sync.Mutex
		requests []string
		waits    []time.Duration
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		if len(requests) <= limited {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"title": "Too Many Requests", "status": 429, "code": "rate_limited", "detail": "too many requests with token tok-1; retry in 2.5s"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	sleep := func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	c, err := New(srv.URL, WithToken("tok"), WithSleep(sleep))
	if err != nil {
		t.Fatal(err)
	}
	return c, &requests, &waits
}

func TestRateLimitedRetry(t *testing.T) {
	buy := func(clientToken string) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			_, err := c.Buy(ctx, BuyRequest{OfferingID: "cbo-abc", ClientToken: clientToken})
			return err
		}
	}
	listBlocks := func(ctx context.Context, c *Client) error { _, err := c.Blocks(ctx, ""); return err }
	tests := map[string]struct {
		limited      int
		retryAfter   string
		call         func(context.Context, *Client) error
		wantCode     string // "" for success
		wantRequests int
		wantWaits    []time.Duration
	}{
		"a GET waits and succeeds": {
			limited: 1, retryAfter: "3", call: listBlocks,
			wantRequests: 2, wantWaits: []time.Duration{3 * time.Second},
		},
		"a GET is retried only once": {
			limited: 2, retryAfter: "1", call: listBlocks,
			wantCode: CodeRateLimited, wantRequests: 2, wantWaits: []time.Duration{time.Second},
		},
		"no Retry-After waits a second": {
			limited: 1, call: listBlocks,
			wantRequests: 2, wantWaits: []time.Duration{time.Second},
		},
		"10s is waited out": {
			limited: 1, retryAfter: "10", call: listBlocks,
			wantRequests: 2, wantWaits: []time.Duration{10 * time.Second},
		},
		"longer than 10s is not waited for": {
			limited: 1, retryAfter: "11", call: listBlocks,
			wantCode: CodeRateLimited, wantRequests: 1,
		},
		"a purchase with a client token is retried": {
			limited: 1, retryAfter: "2", call: buy("ct-1"),
			wantRequests: 2, wantWaits: []time.Duration{2 * time.Second},
		},
		"a purchase without a client token is not": {
			limited: 1, retryAfter: "2", call: buy(""),
			wantCode: CodeRateLimited, wantRequests: 1,
		},
		"another POST is not": {
			limited: 1, retryAfter: "2",
			call:     func(ctx context.Context, c *Client) error { _, err := c.CreateTeam(ctx, "research"); return err },
			wantCode: CodeRateLimited, wantRequests: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, requests, waits := rateLimitedAPI(t, tc.limited, tc.retryAfter, blockJSON)
			err := tc.call(t.Context(), c)
			if got := ProblemCode(err); got != tc.wantCode || (tc.wantCode == "" && err != nil) {
				t.Errorf("error %v, want code %q", err, tc.wantCode)
			}
			if len(*requests) != tc.wantRequests {
				t.Errorf("%d requests %v, want %d", len(*requests), *requests, tc.wantRequests)
			}
			if diff := cmp.Diff(tc.wantWaits, *waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRateLimitedWaitIsCancelled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	c.sleep = func(ctx context.Context, d time.Duration) error {
		cancel() // Ctrl-C while waiting
		return sleepContext(ctx, d)
	}
	if _, err := c.Blocks(ctx, ""); err == nil || ctx.Err() == nil {
		t.Fatalf("Blocks: %v, want the context's error", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"4":                             4 * time.Second,
		"0":                             0,
		"":                              defaultRetryWait,
		"soon":                          defaultRetryWait,
		"-3":                            defaultRetryWait,
		"Tue, 01 Dec 2026 00:00:07 GMT": 7 * time.Second,
		"Mon, 30 Nov 2026 23:00:00 GMT": 0,
	}
	for header, want := range tests {
		if got := parseRetryAfter(header, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", header, got, want)
		}
	}
}
