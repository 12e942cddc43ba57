package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Job is a command run on a block's GPUs.
type Job struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	Team          string            `json:"team"`
	BlockID       string            `json:"blockId"`
	PlanID        string            `json:"planId,omitempty"`
	Command       []string          `json:"command"`
	Env           map[string]string `json:"env"`
	InstanceCount int               `json:"instanceCount"`
	MaxRestarts   int               `json:"maxRestarts"`
	State         string            `json:"state"`
	Restarts      int               `json:"restarts"`
	Reason        string            `json:"reason,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	StartedAt     *time.Time        `json:"startedAt,omitempty"`
	EndedAt       *time.Time        `json:"endedAt,omitempty"`
	Preemptible   bool              `json:"preemptible,omitempty"`
	InstanceType  string            `json:"instanceType,omitempty"`
	Zone          string            `json:"zone,omitempty"`
}

// JobRequest is the body of POST /v1/jobs.
type JobRequest struct {
	Name          string            `json:"name,omitempty"`
	BlockID       string            `json:"blockId,omitempty"`
	PlanID        string            `json:"planId,omitempty"`
	Command       []string          `json:"command"`
	Env           map[string]string `json:"env,omitempty"`
	InstanceCount int               `json:"instanceCount,omitempty"`
	MaxRestarts   int               `json:"maxRestarts,omitempty"`
	Preemptible   bool              `json:"preemptible,omitempty"`
	InstanceType  string            `json:"instanceType,omitempty"`
	Zone          string            `json:"zone,omitempty"`
	Team          string            `json:"team,omitempty"`
}

// JobLog is a piece of an instance's output and where to read on.
type JobLog struct {
	Instance int    `json:"instance"`
	Data     string `json:"data"`
	Next     int64  `json:"next"`
}

// CreateJob runs a command on a block: POST /v1/jobs.
func (c *Client) CreateJob(ctx context.Context, req JobRequest) (Job, error) {
	var j Job
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs", body: req}, &j); err != nil {
		return Job{}, wrapf(err, "creating a job")
	}
	return j, nil
}

// Jobs lists the team's jobs: GET /v1/jobs.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	return c.JobsMatching(ctx, ListFilter{})
}

// Job returns one job: GET /v1/jobs/{id}.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs/" + url.PathEscape(id)}, &j); err != nil {
		return Job{}, wrapf(err, "getting job %s", id)
	}
	return j, nil
}

// StopJob stops a job: POST /v1/jobs/{id}/stop.
func (c *Client) StopJob(ctx context.Context, id string) (Job, error) {
	var j Job
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/jobs/" + url.PathEscape(id) + "/stop"}, &j); err != nil {
		return Job{}, wrapf(err, "stopping job %s", id)
	}
	return j, nil
}

// JobLogs reads an instance's output from offset: GET /v1/jobs/{id}/logs.
func (c *Client) JobLogs(ctx context.Context, id string, instance int, offset int64) (JobLog, error) {
	q := url.Values{"instance": {strconv.Itoa(instance)}, "offset": {strconv.FormatInt(offset, 10)}}
	var l JobLog
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/jobs/" + url.PathEscape(id) + "/logs", query: q}, &l); err != nil {
		return JobLog{}, wrapf(err, "reading the log of job %s", id)
	}
	return l, nil
}
