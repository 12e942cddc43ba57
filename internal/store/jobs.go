package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"capblock/internal/core"
)

// Jobs reads the stored jobs; they are written by Commit (Change.Jobs).
type Jobs interface {
	// Job returns one job, or ErrNotFound.
	Job(ctx context.Context, id string) (core.Job, error)
	// ListJobs returns jobs, oldest first: a team's ("" for every team),
	// only those not final when open is set.
	ListJobs(ctx context.Context, team string, open bool) ([]core.Job, error)
}

// JobWrite stores a job: a new one when ExpectedVersion is 0 (a duplicate
// id is a conflict), else a replacement of the stored job with that
// version (any other version is a conflict). On success the job's
// version is ExpectedVersion+1.
type JobWrite struct {
	Job             core.Job
	ExpectedVersion int64
}

// jobJSON is a job's stored document; id, team, block, state, creation
// time and version also have columns of their own for queries.
type jobJSON struct {
	Name          string            `json:"name"`
	PlanID        string            `json:"planId,omitempty"`
	Command       []string          `json:"command"`
	Env           map[string]string `json:"env,omitempty"`
	InstanceCount int               `json:"instanceCount"`
	MaxRestarts   int               `json:"maxRestarts"`
	Restarts      int               `json:"restarts"`
	Reason        string            `json:"reason,omitempty"`
	StartedAt     int64             `json:"startedAt,omitempty"`
	EndedAt       int64             `json:"endedAt,omitempty"`
	Run           int               `json:"run"`
	Done          []int             `json:"done,omitempty"`
	Slots         []int             `json:"slots,omitempty"`
	Preemptible   bool              `json:"preemptible,omitempty"`
	InstanceType  string            `json:"instanceType,omitempty"`
	Zone          string            `json:"zone,omitempty"`
	Backfill      []backfillJSON    `json:"backfill,omitempty"`
	RunStartedAt  int64             `json:"runStartedAt,omitempty"`
	Unbilled      *spotRunJSON      `json:"unbilled,omitempty"`
}

// spotRunJSON is a preemptible job's stopped run, not charged yet.
type spotRunJSON struct {
	Run       int            `json:"run"`
	StartedAt int64          `json:"startedAt"`
	Backfill  []backfillJSON `json:"backfill,omitempty"`
	KillAtMS  int64          `json:"killAtMs,omitempty"`
}

// backfillJSON is one instance of a preemptible job's run: its node, its
// GPUs, and the block lending them ("" on unsold GPUs).
type backfillJSON struct {
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
	Lent string `json:"lent,omitempty"`
}

// EncodeJob is the stored document of a job.
func EncodeJob(j core.Job) string {
	b, _ := json.Marshal(jobJSON{Name: j.Name, PlanID: j.PlanID, Command: j.Command, Env: j.Env, InstanceCount: j.InstanceCount,
		MaxRestarts: j.MaxRestarts, Restarts: j.Restarts, Reason: j.Reason,
		StartedAt: unixOrZero(j.StartedAt), EndedAt: unixOrZero(j.EndedAt), Run: j.Run, Done: j.Done, Slots: j.Slots,
		Preemptible: j.Preemptible, InstanceType: j.InstanceType, Zone: j.Zone, Backfill: encodeBackfill(j.Backfill), RunStartedAt: unixOrZero(j.RunStartedAt),
		Unbilled: encodeSpotRun(j.Unbilled)}) // strings and ints always marshal
	return string(b)
}

// DecodeJob fills a job from its stored document and columns.
func DecodeJob(id, team, block, state string, created time.Time, version int64, doc string) (core.Job, error) {
	var d jobJSON
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return core.Job{}, fmt.Errorf("decoding job %s: %w", id, err)
	}
	return core.Job{ID: id, Team: team, BlockID: block, State: core.JobState(state), CreatedAt: created, Version: version,
		Name: d.Name, PlanID: d.PlanID, Command: d.Command, Env: d.Env, InstanceCount: d.InstanceCount, MaxRestarts: d.MaxRestarts,
		Restarts: d.Restarts, Reason: d.Reason, StartedAt: timeOrZero(d.StartedAt), EndedAt: timeOrZero(d.EndedAt), Run: d.Run, Done: d.Done, Slots: d.Slots,
		Preemptible: d.Preemptible, InstanceType: d.InstanceType, Zone: d.Zone, Backfill: decodeBackfill(d.Backfill), RunStartedAt: timeOrZero(d.RunStartedAt),
		Unbilled: decodeSpotRun(d.Unbilled)}, nil
}

func encodeSpotRun(r *core.SpotRun) *spotRunJSON {
	if r == nil {
		return nil
	}
	out := &spotRunJSON{Run: r.Run, StartedAt: unixOrZero(r.StartedAt), Backfill: encodeBackfill(r.Backfill)}
	if !r.KillAt.IsZero() {
		out.KillAtMS = r.KillAt.UnixMilli()
	}
	return out
}

func decodeSpotRun(r *spotRunJSON) *core.SpotRun {
	if r == nil {
		return nil
	}
	out := &core.SpotRun{Run: r.Run, StartedAt: timeOrZero(r.StartedAt), Backfill: decodeBackfill(r.Backfill)}
	if r.KillAtMS != 0 {
		out.KillAt = time.UnixMilli(r.KillAtMS).UTC()
	}
	return out
}

func encodeBackfill(allocs []core.BackfillAlloc) []backfillJSON {
	var out []backfillJSON
	for _, a := range allocs {
		out = append(out, backfillJSON{Node: a.Node, GPUs: a.GPUs, Lent: a.Lent})
	}
	return out
}

func decodeBackfill(allocs []backfillJSON) []core.BackfillAlloc {
	var out []core.BackfillAlloc
	for _, a := range allocs {
		out = append(out, core.BackfillAlloc{Node: a.Node, GPUs: a.GPUs, Lent: a.Lent})
	}
	return out
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func timeOrZero(s int64) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(s, 0).UTC()
}
