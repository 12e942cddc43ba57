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
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTimeout bounds each request; 0 means no bound but the context's.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithHTTPClient replaces http.DefaultClient (for tests, proxies, TLS).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// New returns a client of the server at baseURL, e.g. "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid server URL %q: write it like http://127.0.0.1:8080", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, timeout: DefaultTimeout, http: http.DefaultClient}
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
}

// do sends r and decodes a 2xx JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	what := r.method + " " + r.path
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.timeout+r.wait, errRequestTimeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, r)
	if err != nil {
		return fmt.Errorf("building request %s: %w", what, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.transportError(ctx, err, c.timeout+r.wait)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		if context.Cause(ctx) == errRequestTimeout {
			return &TimeoutError{URL: c.BaseURL(), Timeout: c.timeout + r.wait}
		}
		return fmt.Errorf("reading the answer to %s: %w", what, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeProblem(resp.StatusCode, data)
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
