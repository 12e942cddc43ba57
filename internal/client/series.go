package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// SeriesSearch is the body of POST /v1/series-offerings: Count instances
// of a type on the days named, from StartTime to EndTime in TimeZone's
// wall time, from FromDate to ToDate (or for Weeks weeks).
type SeriesSearch struct {
	InstanceType  string   `json:"instanceType"`
	InstanceCount int      `json:"instanceCount"`
	Zone          string   `json:"zone,omitempty"`
	DaysOfWeek    []string `json:"daysOfWeek"`
	StartTime     string   `json:"startTime"`
	EndTime       string   `json:"endTime"`
	TimeZone      string   `json:"timeZone"`
	FromDate      string   `json:"fromDate"`
	ToDate        string   `json:"toDate,omitempty"`
	Weeks         int      `json:"weeks,omitempty"`
	Partial       bool     `json:"partial,omitempty"`
}

// Schedule is a series' recurring window.
type Schedule struct {
	DaysOfWeek []string `json:"daysOfWeek"`
	StartTime  string   `json:"startTime"`
	EndTime    string   `json:"endTime"`
	TimeZone   string   `json:"timeZone"`
	FromDate   string   `json:"fromDate"`
	ToDate     string   `json:"toDate"`
}

// SeriesOffering quotes a series in one zone; OfferingID is empty when it
// cannot be bought.
type SeriesOffering struct {
	OfferingID    string             `json:"offeringId,omitempty"`
	InstanceType  string             `json:"instanceType"`
	InstanceCount int                `json:"instanceCount"`
	Zone          string             `json:"zone"`
	Schedule      Schedule           `json:"schedule"`
	Occurrences   []SeriesOccurrence `json:"occurrences"`
	Fitting       int                `json:"fitting"`
	UpfrontFee    Money              `json:"upfrontFee"`
	OnDemandFee   Money              `json:"onDemandFee"`
	ExpiresAt     time.Time          `json:"expiresAt"`
}

// SeriesOccurrence is one occurrence of a series offering.
type SeriesOccurrence struct {
	StartTime      time.Time `json:"startTime"`
	EndTime        time.Time `json:"endTime"`
	LocalStartTime string    `json:"localStartTime"`
	LocalEndTime   string    `json:"localEndTime"`
	DurationHours  int       `json:"durationHours"`
	Fits           bool      `json:"fits"`
	Reason         string    `json:"reason,omitempty"`
	UpfrontFee     *Money    `json:"upfrontFee,omitempty"`
}

// Series is a purchased series; State is derived from its occurrences.
type Series struct {
	ID            string        `json:"id"`
	Name          string        `json:"name"`
	Team          string        `json:"team"`
	InstanceType  string        `json:"instanceType"`
	InstanceCount int           `json:"instanceCount"`
	Zone          string        `json:"zone"`
	Schedule      Schedule      `json:"schedule"`
	State         string        `json:"state"`
	Occurrences   []SeriesBlock `json:"occurrences"`
	UpfrontFee    Money         `json:"upfrontFee"`
	CreatedAt     time.Time     `json:"createdAt"`
}

// SeriesBlock is one occurrence of a series: a block.
type SeriesBlock struct {
	BlockID        string    `json:"blockId"`
	StartTime      time.Time `json:"startTime"`
	EndTime        time.Time `json:"endTime"`
	LocalStartTime string    `json:"localStartTime"`
	LocalEndTime   string    `json:"localEndTime"`
	DurationHours  int       `json:"durationHours"`
	State          string    `json:"state"`
	UpfrontFee     Money     `json:"upfrontFee"`
}

// BuySeriesRequest is the body of POST /v1/series.
type BuySeriesRequest struct {
	OfferingID  string `json:"offeringId"`
	ClientToken string `json:"clientToken"`
	Name        string `json:"name,omitempty"`
	Team        string `json:"team,omitempty"`
}

// SeriesOfferings quotes a series: POST /v1/series-offerings.
func (c *Client) SeriesOfferings(ctx context.Context, q SeriesSearch) ([]SeriesOffering, error) {
	var out struct {
		SeriesOfferings []SeriesOffering `json:"seriesOfferings"`
	}
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/series-offerings", body: q, idempotent: true}, &out); err != nil {
		return nil, wrapf(err, "searching series offerings")
	}
	return out.SeriesOfferings, nil
}

// BuySeries buys a series offering: POST /v1/series.
func (c *Client) BuySeries(ctx context.Context, req BuySeriesRequest) (Series, error) {
	var s Series
	r := request{method: http.MethodPost, path: "/v1/series", body: req, idempotent: req.ClientToken != ""}
	if err := c.do(ctx, r, &s); err != nil {
		return Series{}, wrapf(err, "buying series offering")
	}
	return s, nil
}

// SeriesList lists the caller's series: GET /v1/series.
func (c *Client) SeriesList(ctx context.Context) ([]Series, error) {
	return c.SeriesMatching(ctx, ListFilter{})
}

// Series fetches one series: GET /v1/series/{id}.
func (c *Client) Series(ctx context.Context, id string) (Series, error) {
	var s Series
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/series/" + url.PathEscape(id)}, &s); err != nil {
		return Series{}, wrapf(err, "getting series %s", id)
	}
	return s, nil
}

// CancelSeries cancels every occurrence not yet ended: POST /v1/series/{id}/cancel.
func (c *Client) CancelSeries(ctx context.Context, id string) (Series, error) {
	var s Series
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/series/" + url.PathEscape(id) + "/cancel"}, &s); err != nil {
		return Series{}, wrapf(err, "cancelling series %s", id)
	}
	return s, nil
}

// OrderRequest is the body of POST /v1/orders.
type OrderRequest struct {
	Name          string     `json:"name,omitempty"`
	Mode          string     `json:"mode,omitempty"`
	InstanceType  string     `json:"instanceType"`
	InstanceCount int        `json:"instanceCount"`
	Zone          string     `json:"zone,omitempty"`
	DurationHours int        `json:"durationHours"`
	StartAfter    time.Time  `json:"startAfter"`
	EndBefore     time.Time  `json:"endBefore"`
	Deadline      *time.Time `json:"deadline,omitempty"`
	MaxFee        *Money     `json:"maxFee,omitempty"`
	Team          string     `json:"team,omitempty"`
}

// Order is a standing order.
type Order struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	Team          string    `json:"team"`
	Mode          string    `json:"mode"`
	InstanceType  string    `json:"instanceType"`
	InstanceCount int       `json:"instanceCount"`
	Zone          string    `json:"zone,omitempty"`
	DurationHours int       `json:"durationHours"`
	StartAfter    time.Time `json:"startAfter"`
	EndBefore     time.Time `json:"endBefore"`
	Deadline      time.Time `json:"deadline"`
	MaxFee        *Money    `json:"maxFee,omitempty"`
	State         string    `json:"state"`
	BlockID       string    `json:"blockId,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
}

// CreateOrder places a standing order: POST /v1/orders.
func (c *Client) CreateOrder(ctx context.Context, req OrderRequest) (Order, error) {
	var o Order
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/orders", body: req}, &o); err != nil {
		return Order{}, wrapf(err, "placing order")
	}
	return o, nil
}

// Orders lists the caller's standing orders: GET /v1/orders.
func (c *Client) Orders(ctx context.Context) ([]Order, error) {
	return c.OrdersMatching(ctx, ListFilter{})
}

// Order fetches one standing order: GET /v1/orders/{id}.
func (c *Client) Order(ctx context.Context, id string) (Order, error) {
	var o Order
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/orders/" + url.PathEscape(id)}, &o); err != nil {
		return Order{}, wrapf(err, "getting order %s", id)
	}
	return o, nil
}

// CancelOrder withdraws an open order: POST /v1/orders/{id}/cancel.
func (c *Client) CancelOrder(ctx context.Context, id string) (Order, error) {
	var o Order
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/orders/" + url.PathEscape(id) + "/cancel"}, &o); err != nil {
		return Order{}, wrapf(err, "cancelling order %s", id)
	}
	return o, nil
}
