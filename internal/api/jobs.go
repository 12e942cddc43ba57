package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// registerJobs declares jobs: commands run on a block's GPUs.
func (s *server) registerJobs(api huma.API) {
	create := s.operation("createJob", http.MethodPost, "/v1/jobs", "jobs",
		"Run a command on a block's GPUs: it starts when the block is active and is stopped before its end")
	create.DefaultStatus = http.StatusCreated
	huma.Register(api, create, s.createJob)
	huma.Register(api, s.operation("listJobs", http.MethodGet, "/v1/jobs", "jobs", "List the team's jobs"), s.listJobs)
	huma.Register(api, s.operation("getJob", http.MethodGet, "/v1/jobs/{id}", "jobs", "Get a job"), s.getJob)
	huma.Register(api, s.operation("getJobLogs", http.MethodGet, "/v1/jobs/{id}/logs", "jobs",
		"Read an instance's output (stdout and stderr), from an offset"), s.jobLogs)
	huma.Register(api, s.operation("stopJob", http.MethodPost, "/v1/jobs/{id}/stop", "jobs",
		"Stop a job: SIGTERM, then SIGKILL after a grace period"), s.stopJob)
}

type jobJSON struct {
	ID            string            `json:"id" example:"job-0a1b2c3d4e5f6a7b8"`
	Name          string            `json:"name"`
	Team          string            `json:"team"`
	BlockID       string            `json:"blockId" doc:"The block the job runs on (for a plan: its current segment)."`
	PlanID        string            `json:"planId,omitempty"`
	Command       []string          `json:"command"`
	Env           map[string]string `json:"env"`
	InstanceCount int               `json:"instanceCount"`
	MaxRestarts   int               `json:"maxRestarts"`
	State         string            `json:"state" enum:"pending,running,interrupted,succeeded,failed,stopped"`
	Restarts      int               `json:"restarts"`
	Reason        string            `json:"reason,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	StartedAt     *time.Time        `json:"startedAt,omitempty"`
	EndedAt       *time.Time        `json:"endedAt,omitempty"`
	Preemptible   bool              `json:"preemptible,omitempty" doc:"Runs on backfill (unsold or lent GPUs) at the spot price; preempted with notice when a block needs its GPUs."`
	InstanceType  string            `json:"instanceType,omitempty" doc:"A preemptible job's instance type."`
	Zone          string            `json:"zone,omitempty"`
}

func toJob(j core.Job) jobJSON {

	env := j.Env
	if env == nil {
		env = map[string]string{}
	}
	return jobJSON{ID: j.ID, Name: j.Name, Team: j.Team, BlockID: j.BlockID, PlanID: j.PlanID, Command: j.Command, Env: env,
		InstanceCount: j.InstanceCount, MaxRestarts: j.MaxRestarts, State: string(j.State), Restarts: j.Restarts,
		Reason: j.Reason, CreatedAt: j.CreatedAt.UTC(), StartedAt: optionalTime(j.StartedAt), EndedAt: optionalTime(j.EndedAt),
		Preemptible: j.Preemptible, InstanceType: j.InstanceType, Zone: j.Zone}
}

type createJobInput struct {
	Body struct {
		Name          string            `json:"name,omitempty" maxLength:"128"`
		BlockID       string            `json:"blockId,omitempty" maxLength:"64" doc:"The block whose GPUs run the job; or give planId."`
		PlanID        string            `json:"planId,omitempty" maxLength:"64" doc:"A training plan: the job runs in its segments, resuming in each."`
		Command       []string          `json:"command" minItems:"1" maxItems:"256" doc:"The program and its arguments."`
		Env           map[string]string `json:"env,omitempty" maxProperties:"256"`
		InstanceCount int               `json:"instanceCount,omitempty" minimum:"0" maximum:"64" doc:"Instances to run; all of the block's when 0."`
		MaxRestarts   int               `json:"maxRestarts,omitempty" minimum:"0" maximum:"100" doc:"Restarts after a non-zero exit."`
		Preemptible   bool              `json:"preemptible,omitempty" doc:"Run on backfill, on no block: GPUs unsold or lent, at the spot price per GPU-hour used, preempted (SIGTERM) a notice before a block needs them. Give instanceType."`
		InstanceType  string            `json:"instanceType,omitempty" maxLength:"64" doc:"A preemptible job's instance type (its GPUs per instance)."`
		Zone          string            `json:"zone,omitempty" maxLength:"64" doc:"A preemptible job's zone; any when empty."`
		Team          string            `json:"team,omitempty" maxLength:"64" doc:"The team a preemptible job is for and charged to; the caller's when empty (another team's: admins only)."`
	}
}

func (s *server) createJob(ctx context.Context, in *createJobInput) (*out[jobJSON], error) {
	b := in.Body
	req := contract.JobRequest{Name: b.Name, BlockID: b.BlockID, PlanID: b.PlanID, Command: b.Command, Env: b.Env,
		InstanceCount: b.InstanceCount, MaxRestarts: b.MaxRestarts, Preemptible: b.Preemptible, InstanceType: b.InstanceType, Zone: b.Zone}
	if b.Preemptible {
		team := s.teamFor(ctx, b.Team)
		req.Team = team
	} else if b.Team != "" {
		return nil, serviceProblem(ctx, core.Invalidf("team is for preemptible jobs; a job on a block is its block's team's"))
	}
	j, err := s.svc.CreateJob(ctx, scopeOf(ctx), req)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toJob(j))
}

type jobsJSON struct {
	Jobs []jobJSON `json:"jobs"`
}

type listJobsInput struct {
	State []string `query:"state,explode" enum:"pending,running,interrupted,succeeded,failed,stopped" doc:"Only jobs in these states (repeat the parameter); all when absent."`
	Team  string   `query:"team" maxLength:"64" doc:"Only this team's jobs (its id). A team outside the caller's scope has none to show: a filter never widens what the caller may see."`
}

func (s *server) listJobs(ctx context.Context, in *listJobsInput) (*out[jobsJSON], error) {
	f := listFilter{states: in.State, team: in.Team}
	js, err := s.svc.ListJobs(ctx, scopeOf(ctx))
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := jobsJSON{Jobs: make([]jobJSON, 0, len(js))}
	for _, j := range js {
		if v := toJob(j); f.keep(v.State, v.Team, nil) {
			resp.Jobs = append(resp.Jobs, v)
		}
	}
	return reply(resp)
}

type jobIDInput struct {
	ID string `path:"id" doc:"Job id."`
}

func (s *server) getJob(ctx context.Context, in *jobIDInput) (*out[jobJSON], error) {
	j, err := s.svc.GetJob(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toJob(j))
}

func (s *server) stopJob(ctx context.Context, in *jobIDInput) (*out[jobJSON], error) {
	j, err := s.svc.StopJob(ctx, scopeOf(ctx), in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toJob(j))
}

type jobLogsInput struct {
	ID       string `path:"id" doc:"Job id."`
	Instance int    `query:"instance" minimum:"0" doc:"The instance (rank) whose output to read."`
	Offset   int64  `query:"offset" doc:"Byte offset to read from; negative counts from the end (-4096: the last 4 KiB)."`
	Limit    int    `query:"limit" minimum:"1" maximum:"1048576" default:"65536"`
}

type jobLogsJSON struct {
	Instance int    `json:"instance"`
	Data     string `json:"data" doc:"The output read, as text."`
	Next     int64  `json:"next" doc:"The offset to read from next, to follow the log."`
}

func (s *server) jobLogs(ctx context.Context, in *jobLogsInput) (*out[jobLogsJSON], error) {
	data, next, err := s.svc.JobLogs(ctx, scopeOf(ctx), in.ID, in.Instance, in.Offset, in.Limit)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(jobLogsJSON{Instance: in.Instance, Data: string(data), Next: next})
}
