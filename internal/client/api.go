package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// InstanceTypes lists what is sold: GET /v1/instance-types.
func (c *Client) InstanceTypes(ctx context.Context) ([]InstanceType, error) {
	var out struct {
		InstanceTypes []InstanceType `json:"instanceTypes"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/instance-types"}, &out); err != nil {
		return nil, wrapf(err, "listing instance types")
	}
	return out.InstanceTypes, nil
}

// Nodes lists the fleet's nodes: GET /v1/nodes.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out struct {
		Nodes []Node `json:"nodes"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/nodes"}, &out); err != nil {
		return nil, wrapf(err, "listing nodes")
	}
	return out.Nodes, nil
}

// FailNode marks a node failed (admin): POST /v1/admin/nodes/{name}/fail.
func (c *Client) FailNode(ctx context.Context, name, reason string) (NodeReport, error) {
	var r NodeReport
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/admin/nodes/" + url.PathEscape(name) + "/fail", body: body}, &r); err != nil {
		return NodeReport{}, wrapf(err, "failing node %s", name)
	}
	return r, nil
}

// RecoverNode marks a node healthy again (admin): POST
// /v1/admin/nodes/{name}/recover.
func (c *Client) RecoverNode(ctx context.Context, name string) (NodeReport, error) {
	var r NodeReport
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/admin/nodes/" + url.PathEscape(name) + "/recover"}, &r); err != nil {
		return NodeReport{}, wrapf(err, "recovering node %s", name)
	}
	return r, nil
}

// Offerings searches block offerings, best first: GET /v1/offerings. An
// empty list means nothing fits.
func (c *Client) Offerings(ctx context.Context, q OfferingsQuery) ([]Offering, error) {
	v := url.Values{}
	for _, t := range q.InstanceTypes {
		v.Add("instanceType", t)
	}
	v.Set("instanceCount", strconv.Itoa(q.InstanceCount)) // always: a zero count is the server's to refuse, with its reason
	setInt(v, "durationHours", q.DurationHours)
	setInt(v, "minDurationHours", q.MinDurationHours)
	setInt(v, "maxDurationHours", q.MaxDurationHours)
	setTime(v, "startAfter", q.StartAfter)
	setTime(v, "endBefore", q.EndBefore)
	if q.Team != "" {
		v.Set("team", q.Team)
	}
	if q.Zone != "" {
		v.Set("zone", q.Zone)
	}
	setInt(v, "maxResults", q.MaxResults)
	var out struct {
		Offerings []Offering `json:"offerings"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/offerings", query: v}, &out); err != nil {
		return nil, wrapf(err, "searching offerings")
	}
	return out.Offerings, nil
}

// Buy purchases an offering: POST /v1/blocks. Retrying with the same
// ClientToken returns the same block, so a purchase with one is retried
// once after a rate_limited answer.
func (c *Client) Buy(ctx context.Context, req BuyRequest) (Block, error) {
	b, _, err := c.Purchase(ctx, req)
	return b, err
}

// Purchase is Buy that also tells whether this request made the block
// (201) or the client token had already bought it (200: nothing was
// charged again).
func (c *Client) Purchase(ctx context.Context, req BuyRequest) (b Block, created bool, err error) {
	status := 0
	r := request{method: http.MethodPost, path: "/v1/blocks", body: req, idempotent: req.ClientToken != "", status: &status}
	if err := c.do(ctx, r, &b); err != nil {
		return Block{}, false, wrapf(err, "buying offering")
	}
	return b, status != http.StatusOK, nil
}

// Blocks lists the caller's blocks, of one state when state is not empty:
// GET /v1/blocks.
func (c *Client) Blocks(ctx context.Context, state string) ([]Block, error) {
	return c.BlocksMatching(ctx, BlockFilter{ListFilter: ListFilter{States: []string{state}}})
}

// Block fetches one block: GET /v1/blocks/{id}.
func (c *Client) Block(ctx context.Context, id string) (Block, error) {
	var b Block
	if err := c.do(ctx, request{method: http.MethodGet, path: blockPath(id, "")}, &b); err != nil {
		return Block{}, wrapf(err, "getting block %s", id)
	}
	return b, nil
}

// BlockStatus fetches a block's capacity and placement:
// GET /v1/blocks/{id}/status.
func (c *Client) BlockStatus(ctx context.Context, id string) (BlockStatus, error) {
	var s BlockStatus
	if err := c.do(ctx, request{method: http.MethodGet, path: blockPath(id, "/status")}, &s); err != nil {
		return BlockStatus{}, wrapf(err, "getting the status of block %s", id)
	}
	return s, nil
}

// CancelBlock cancels or releases a block: POST /v1/blocks/{id}/cancel.
func (c *Client) CancelBlock(ctx context.Context, id string) (Block, error) {
	var b Block
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/cancel")}, &b); err != nil {
		return Block{}, wrapf(err, "cancelling block %s", id)
	}
	return b, nil
}

// ApproveBlock approves a block waiting for approval (admin):
// POST /v1/blocks/{id}/approve.
func (c *Client) ApproveBlock(ctx context.Context, id string) (Block, error) {
	var b Block
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/approve")}, &b); err != nil {
		return Block{}, wrapf(err, "approving block %s", id)
	}
	return b, nil
}

// ExtensionOfferings lists offerings that extend a block by durationHours:
// GET /v1/blocks/{id}/extension-offerings.
func (c *Client) ExtensionOfferings(ctx context.Context, id string, durationHours int) ([]Offering, error) {
	v := url.Values{}
	setInt(v, "durationHours", durationHours)
	var out struct {
		Offerings []Offering `json:"offerings"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: blockPath(id, "/extension-offerings"), query: v}, &out); err != nil {
		return nil, wrapf(err, "searching extensions of block %s", id)
	}
	return out.Offerings, nil
}

// ExtendBlock buys an extension offering: POST /v1/blocks/{id}/extensions.
// The block keeps its id and gets a later end.
func (c *Client) ExtendBlock(ctx context.Context, id, offeringID string) (Block, error) {
	body := map[string]string{"offeringId": offeringID}
	var b Block
	if err := c.do(ctx, request{method: http.MethodPost, path: blockPath(id, "/extensions"), body: body}, &b); err != nil {
		return Block{}, wrapf(err, "extending block %s", id)
	}
	return b, nil
}

// Events returns the events after the cursor ("" = from the start),
// waiting up to wait for one (a long poll): GET /v1/events.
func (c *Client) Events(ctx context.Context, after string, wait time.Duration) (EventPage, error) {
	v := url.Values{}
	if after != "" {
		v.Set("after", after)
	}
	if wait > 0 {
		v.Set("wait", wait.String())
	}
	var page EventPage
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/events", query: v, wait: wait}, &page); err != nil {
		return EventPage{}, wrapf(err, "reading events")
	}
	return page, nil
}

// NowHeader is the header in which the server tells its clock on every
// answer (RFC 3339): the simulated time on a server run with --sim-clock.
const NowHeader = "Capblock-Now"

// Now returns the server's clock, from which relative times such as
// "now", "+5d" and "tomorrow" are read: the NowHeader of its answer to
// GET /healthz, which needs no token.
func (c *Client) Now(ctx context.Context) (time.Time, error) {
	var h http.Header
	if err := c.do(ctx, request{method: http.MethodGet, path: "/healthz", header: &h}, nil); err != nil {
		return time.Time{}, wrapf(err, "reading the server's clock")
	}
	v := h.Get(NowHeader)
	if v == "" {
		return time.Time{}, fmt.Errorf("reading the server's clock: the server at %s does not tell it (no %s header: an older version); give times as dates, e.g. 2026-12-01T10:00:00Z", c.BaseURL(), NowHeader)
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the server's clock: %s %q is not an RFC 3339 time", NowHeader, v)
	}
	return t.UTC(), nil
}

// Clock reads the server's simulated clock. It asks GET /v1/admin/clock
// and, where only POST exists, advances the clock by nothing.
func (c *Client) Clock(ctx context.Context) (Clock, error) {
	var clk Clock
	err := c.do(ctx, request{method: http.MethodGet, path: "/v1/admin/clock"}, &clk)
	var p *Problem
	if errors.As(err, &p) && p.Status == http.StatusMethodNotAllowed {
		return c.postClock(ctx, map[string]string{"advance": "0s"}, "reading")
	}
	if err != nil {
		return Clock{}, wrapf(err, "reading the clock")
	}
	return clk, nil
}

// AdvanceClock moves the simulated clock forward by d.
func (c *Client) AdvanceClock(ctx context.Context, d time.Duration) (Clock, error) {
	return c.postClock(ctx, map[string]string{"advance": d.String()}, "advancing")
}

// SetClock sets the simulated clock to t.
func (c *Client) SetClock(ctx context.Context, t time.Time) (Clock, error) {
	return c.postClock(ctx, map[string]string{"now": t.UTC().Format(time.RFC3339Nano)}, "setting")
}

func (c *Client) postClock(ctx context.Context, body map[string]string, verb string) (Clock, error) {
	var clk Clock
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/admin/clock", body: body}, &clk); err != nil {
		return Clock{}, wrapf(err, "%s the clock", verb)
	}
	return clk, nil
}

func blockPath(id, suffix string) string { return "/v1/blocks/" + url.PathEscape(id) + suffix }

func setInt(v url.Values, key string, n int) {
	if n != 0 {
		v.Set(key, strconv.Itoa(n))
	}
}

func setTime(v url.Values, key string, t time.Time) {
	if !t.IsZero() {
		v.Set(key, t.UTC().Format(time.RFC3339Nano))
	}
}

// Policy is the operator's policy (GET /v1/policy): the fleet file's
// limits a buyer is held to.
type Policy struct {
	MaxInstancesPerBlock     int   `json:"maxInstancesPerBlock"`
	MinDurationSeconds       int64 `json:"minDurationSeconds"`
	MaxDurationSeconds       int64 `json:"maxDurationSeconds"`
	MinLeadTimeSeconds       int64 `json:"minLeadTimeSeconds"`
	MaxLeadTimeSeconds       int64 `json:"maxLeadTimeSeconds"`
	OfferingTTLSeconds       int64 `json:"offeringTtlSeconds"`
	LockInSeconds            int64 `json:"lockInSeconds"`
	WarnBeforeSeconds        int64 `json:"warnBeforeSeconds"`
	TerminateBeforeSeconds   int64 `json:"terminateBeforeSeconds"`
	ExtendFromSeconds        int64 `json:"extendFromSeconds"`
	ExtendUntilSeconds       int64 `json:"extendUntilSeconds"`
	RefundBeforeStartPercent int   `json:"refundBeforeStartPercent"`
	RefundAfterStartPercent  int   `json:"refundAfterStartPercent"`
	ApprovalAboveInstances   int   `json:"approvalAboveInstances"`
	ApprovalDeadlineSeconds  int64 `json:"approvalDeadlineSeconds"`
	MaxResults               int   `json:"maxResults"`
}

// Policy fetches the operator's policy: GET /v1/policy.
func (c *Client) Policy(ctx context.Context) (Policy, error) {
	var p Policy
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/policy"}, &p); err != nil {
		return Policy{}, wrapf(err, "reading the operator's policy")
	}
	return p, nil
}

// CancelQuote is what cancelling a block now would refund, per the
// operator's policy; it cancels nothing: GET /v1/blocks/{id}/cancel-quote.
func (c *Client) CancelQuote(ctx context.Context, id string) (Money, error) {
	var out struct {
		Refund Money `json:"refund"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: blockPath(id, "/cancel-quote")}, &out); err != nil {
		return Money{}, wrapf(err, "quoting the cancellation of block %s", id)
	}
	return out.Refund, nil
}
