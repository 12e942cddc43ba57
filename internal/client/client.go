// Package client is a small typed HTTP client of capblock's API v1 (see
// API.md): it builds requests, sends the bearer token, decodes the JSON
// answers into Go structs and turns RFC 9457 problems into *Problem errors.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one request (a long poll gets its wait on top).
const DefaultTimeout = 30 * time.Second

// maxBody bounds how much of a response is read.
const maxBody = 32 << 20

// Client talks to one capblock server. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	token   string
	timeout time.Duration
	http    *http.Client
	sleep   func(context.Context, time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTimeout bounds each request; 0 means no bound but the context's.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHTTPClient replaces http.DefaultClient (for tests, proxies, TLS).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithSleep replaces how the client waits before retrying a rate-limited
// request (tests pass one that returns at once). sleep returns early with
// the context's error when ctx ends.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// New returns a client of the server at baseURL, e.g. "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid server URL %q: write it like http://127.0.0.1:8080", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, timeout: DefaultTimeout, http: http.DefaultClient, sleep: sleepContext}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the server's address as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base.String() }

// ErrUnreachable is wrapped by every error where no connection to the
// server could be made.
var ErrUnreachable = errors.New("server not reachable")

// UnreachableError says that the server at URL did not answer at all.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the capblock server is not reachable at %s (%s); start it with `capblock serve` or set --url or CAPBLOCK_URL to its address",
		e.URL, unreachableCause(e.Err))
}

// Unwrap returns ErrUnreachable and the transport's error.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

func unreachableCause(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("host %s not found", dnsErr.Name)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host"
	}
	return err.Error()
}

// TimeoutError says that the server took longer than the client's timeout.
type TimeoutError struct {
	URL     string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the capblock server at %s did not answer within %s; check that it is healthy or raise --timeout", e.URL, e.Timeout)
}

// request is one API call.
type request struct {
	method string
	path   string // below the base URL, already escaped
	query  url.Values
	body   any
	wait   time.Duration // a long poll's wait, added to the timeout
	// idempotent marks a non-GET request that is safe to send twice (a
	// purchase with a client token).
	idempotent bool
	// header, when not nil, receives the answer's headers.
	header *http.Header
	// status, when not nil, receives the answer's status code.
	status *int
}

// retryable reports whether r may be sent again after a rate_limited answer.
func (r request) retryable() bool { return r.method == http.MethodGet || r.idempotent }

// MaxRetryWait is the longest Retry-After that the client waits out before
// it retries a rate-limited request once; a longer one returns the
// rate_limited problem at once.
const MaxRetryWait = 10 * time.Second

// defaultRetryWait is the wait when a 429 answer has no usable Retry-After.
const defaultRetryWait = time.Second

// do sends r and decodes a 2xx JSON answer into out (when not nil). A
// rate_limited answer to a request that is safe to repeat is retried once,
// after the server's Retry-After.
func (c *Client) do(ctx context.Context, r request, out any) error {
	retryAfter, err := c.send(ctx, r, out)
	if retryAfter < 0 || !r.retryable() || retryAfter > MaxRetryWait {
		return err
	}
	if serr := c.sleep(ctx, retryAfter); serr != nil {
		return serr // the caller cancelled while waiting
	}
	_, err = c.send(ctx, r, out)
	return err
}

// send makes one attempt at r. retryAfter is how long a 429 answer asks to
// wait, and -1 for any other outcome.
func (c *Client) send(ctx context.Context, r request, out any) (retryAfter time.Duration, err error) {
	what := r.method + " " + r.path
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout+r.wait, errRequestTimeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return -1, fmt.Errorf("building request %s: %w", what, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return -1, c.transportError(ctx, err, c.timeout+r.wait)
	}
	defer resp.Body.Close()
	if r.header != nil {
		*r.header = resp.Header
	}
	if r.status != nil {
		*r.status = resp.StatusCode
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		if context.Cause(ctx) == errRequestTimeout {
			return -1, &TimeoutError{URL: c.BaseURL(), Timeout: c.timeout + r.wait}
		}
		return -1, fmt.Errorf("reading the answer to %s: %w", what, err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), decodeProblem(resp.StatusCode, data)
	}
	return -1, decodeAnswer(what, resp.StatusCode, data, out)
}

// decodeAnswer turns a problem into an error and decodes a 2xx answer into
// out (when not nil).
func decodeAnswer(what string, status int, data []byte, out any) error {
	if status < 200 || status > 299 {
		return decodeProblem(status, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the answer to %s: %w", what, err)
	}
	return nil
}

var errRequestTimeout = errors.New("request timed out")

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date. A missing or unreadable one means defaultRetryWait.
func parseRetryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return defaultRetryWait
}

// sleepContext waits for d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	target := c.BaseURL() + r.path // r.path is already escaped
	if q := r.query.Encode(); q != "" {
		target += "?" + q
	}
	var body io.Reader
	if r.body != nil {
		data, err := json.Marshal(r.body)
		if err != nil {
			return nil, fmt.Errorf("encoding the body: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// transportError classifies an error where no HTTP answer came back.
func (c *Client) transportError(ctx context.Context, err error, timeout time.Duration) error {
	switch {
	case context.Cause(ctx) == errRequestTimeout:
		return &TimeoutError{URL: c.BaseURL(), Timeout: timeout}
	case ctx.Err() != nil:
		return ctx.Err() // the caller cancelled (Ctrl-C)
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &opErr) && opErr.Op == "dial" || errors.As(err, &dnsErr) {
		return &UnreachableError{URL: c.BaseURL(), Err: err}
	}
	return fmt.Errorf("talking to the capblock server at %s: %w", c.BaseURL(), err)
}
