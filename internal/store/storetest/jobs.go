package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/core"
	"capblock/internal/store"
)

// jobsTests check jobs: written by Commit (Change.Jobs), read by the
// methods of store.Jobs.
var jobsTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"JobsRoundTrip", testJobsRoundTrip},
	{"JobsVersions", testJobsVersions},
	{"JobsList", testJobsList},
}

func sampleJob(id, team string) core.Job {
	return core.Job{ID: id, Name: "train " + id, Team: team, BlockID: "cb-1", Command: []string{"python", "train.py", "--lr=3e-4"},
		Env: map[string]string{"SEED": "7"}, InstanceCount: 2, MaxRestarts: 3, State: core.JobPending, CreatedAt: hour(1)}
}

func testJobsRoundTrip(t *testing.T, h Harness) {
	s := h.Open(t)
	j := sampleJob("job-1", "team-a")
	mustCommit(t, s, store.Change{Jobs: []store.JobWrite{{Job: j}},
		Events: []core.Event{{ID: "e1", Time: hour(1), Type: core.EventJobPending, Subject: j.ID, Team: j.Team}}})
	got, err := s.Job(t.Context(), j.ID)
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	j.Version = 1
	if diff := cmp.Diff(j, got); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}
	// Every field survives an update.
	run := j
	run.State, run.Restarts, run.Run, run.Reason, run.Done = core.JobRunning, 2, 3, "exit code 1", []int{1}
	run.BlockID, run.PlanID = "cb-2", "tp-1"
	run.StartedAt, run.EndedAt = hour(2), hour(3)
	mustCommit(t, s, store.Change{Jobs: []store.JobWrite{{Job: run, ExpectedVersion: 1}}})
	got, _ = s.Job(t.Context(), j.ID)
	run.Version = 2
	if diff := cmp.Diff(run, got); diff != "" {
		t.Errorf("Job after an update (-want +got):\n%s", diff)
	}
	// A preemptible job's fields survive too.
	pre := run
	pre.BlockID, pre.PlanID, pre.Preemptible, pre.InstanceType, pre.Zone = "", "", true, "h100.1x", "zone-a"
	pre.Backfill = []core.BackfillAlloc{{Node: "n1", GPUs: []int{2, 3}}, {Node: "n2", GPUs: []int{0, 1}, Lent: "cb-9"}}
	pre.RunStartedAt = hour(4)
	pre.Unbilled = &core.SpotRun{Run: 2, StartedAt: hour(3), Backfill: []core.BackfillAlloc{{Node: "n3", GPUs: []int{4, 5}, Lent: "cb-8"}},
		KillAt: hour(4).Add(-5 * time.Second)}
	mustCommit(t, s, store.Change{Jobs: []store.JobWrite{{Job: pre, ExpectedVersion: 2}}})
	got, _ = s.Job(t.Context(), j.ID)
	pre.Version = 3
	if diff := cmp.Diff(pre, got); diff != "" {
		t.Errorf("preemptible job (-want +got):\n%s", diff)
	}
	if _, err := s.Job(t.Context(), "job-none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Job of an unknown id: %v, want ErrNotFound", err)
	}
}

func testJobsVersions(t *testing.T, h Harness) {
	s := h.Open(t)
	j := sampleJob("job-1", "team-a")
	mustCommit(t, s, store.Change{Jobs: []store.JobWrite{{Job: j}}})
	// A duplicate id, a stale version, a job never stored: conflicts, and
	// nothing else of the change is stored.
	for name, w := range map[string]store.JobWrite{
		"duplicate": {Job: j},
		"stale":     {Job: j, ExpectedVersion: 7},
		"unknown":   {Job: sampleJob("job-2", "team-a"), ExpectedVersion: 1},
	} {
		t.Run(name, func(t *testing.T) {
			wantConflict(t, s, store.Change{Jobs: []store.JobWrite{w},
				Events: []core.Event{{ID: "e-" + name, Time: hour(1), Type: core.EventJobRunning, Subject: j.ID, Team: j.Team}}})
			evs, err := s.Events(t.Context(), "", 0, 0)
			if err != nil || len(evs) != 0 {
				t.Fatalf("events after a refused change: %v, %v", evs, err)
			}
		})
	}
	got, _ := s.Job(t.Context(), j.ID)
	if got.Version != 1 || got.State != core.JobPending {
		t.Fatalf("the job changed under refused writes: %+v", got)
	}
}

func testJobsList(t *testing.T, h Harness) {
	s := h.Open(t)
	a1, a2, b1 := sampleJob("job-a1", "team-a"), sampleJob("job-a2", "team-a"), sampleJob("job-b1", "team-b")
	a2.CreatedAt, a2.State = hour(2), core.JobSucceeded
	b1.CreatedAt = hour(0)
	mustCommit(t, s, store.Change{Jobs: []store.JobWrite{{Job: a2}, {Job: b1}, {Job: a1}}})
	ids := func(team string, open bool) []string {
		js, err := s.ListJobs(t.Context(), team, open)
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	for name, tc := range map[string]struct {
		team string
		open bool
		want []string
	}{
		"one team":         {"team-a", false, []string{"job-a1", "job-a2"}},
		"every team":       {"", false, []string{"job-b1", "job-a1", "job-a2"}},
		"open ones":        {"", true, []string{"job-b1", "job-a1"}},
		"a team, open":     {"team-a", true, []string{"job-a1"}},
		"a team with none": {"team-c", false, nil},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(tc.team, tc.open), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListJobs(%q, %v) (-want +got):\n%s", tc.team, tc.open, diff)
			}
		})
	}
}
