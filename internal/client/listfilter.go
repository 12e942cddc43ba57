package client

import (
	"context"
	"net/http"
	"net/url"
)

// ListFilter narrows a list of blocks, plans, jobs, series or orders to
// those in any of States and of Team (its id). The server applies it to
// what the caller may see; a zero filter lists all of that.
type ListFilter struct {
	States []string
	Team   string
}

// BlockFilter is a ListFilter of blocks, which also keeps only those
// with every one of Tags ("key=value"): only blocks have tags.
type BlockFilter struct {
	ListFilter
	Tags []string
}

// query is f as the list operations' query parameters, each state a
// parameter of its own.
func (f ListFilter) query() url.Values {
	v := url.Values{}
	for _, s := range f.States {
		if s != "" {
			v.Add("state", s)
		}
	}
	if f.Team != "" {
		v.Set("team", f.Team)
	}
	return v
}

// query is f as GET /v1/blocks's query parameters, each state and tag a
// parameter of its own.
func (f BlockFilter) query() url.Values {
	v := f.ListFilter.query()
	for _, t := range f.Tags {
		v.Add("tag", t)
	}
	return v
}

// BlocksMatching lists the blocks that f keeps: GET /v1/blocks.
func (c *Client) BlocksMatching(ctx context.Context, f BlockFilter) ([]Block, error) {
	var out struct {
		Blocks []Block `json:"blocks"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/blocks", query: f.query()}, &out); err != nil {
		return nil, wrapf(err, "listing blocks")
	}
	return out.Blocks, nil
}

// PlansMatching lists the training plans that f keeps: GET /v1/plans.
func (c *Client) PlansMatching(ctx context.Context, f ListFilter) ([]Plan, error) {
	var out struct {
		Plans []Plan `json:"plans"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/plans", query: f.query()}, &out); err != nil {
		return nil, wrapf(err, "listing plans")
	}
	return out.Plans, nil
}

// JobsMatching lists the jobs that f keeps: GET /v1/jobs.
func (c *Client) JobsMatching(ctx context.Context, f ListFilter) ([]Job, error) {
	var out struct {
		Jobs []Job `json:"jobs"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs", query: f.query()}, &out); err != nil {
		return nil, wrapf(err, "listing jobs")
	}
	return out.Jobs, nil
}

// SeriesMatching lists the recurring series that f keeps: GET /v1/series.
func (c *Client) SeriesMatching(ctx context.Context, f ListFilter) ([]Series, error) {
	var out struct {
		Series []Series `json:"series"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/series", query: f.query()}, &out); err != nil {
		return nil, wrapf(err, "listing series")
	}
	return out.Series, nil
}

// OrdersMatching lists the standing orders that f keeps: GET /v1/orders.
func (c *Client) OrdersMatching(ctx context.Context, f ListFilter) ([]Order, error) {
	var out struct {
		Orders []Order `json:"orders"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/orders", query: f.query()}, &out); err != nil {
		return nil, wrapf(err, "listing orders")
	}
	return out.Orders, nil
}
