package core

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecideJob(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-time.Hour)
	block := func(s BlockState, terminating bool) Block {
		return Block{ID: "cb-1", State: s, Terminating: terminating}
	}
	tests := map[string]struct {
		job       Job
		block     Block
		wantState JobState
		wantStep  JobStep
		wantOK    bool
	}{
		"pending, block scheduled: wait":   {Job{State: JobPending, CreatedAt: created}, block(StateScheduled, false), JobPending, JobStep{}, false},
		"pending, block active: start":     {Job{State: JobPending, CreatedAt: created}, block(StateActive, false), JobRunning, JobStep{Event: EventJobRunning, Start: true}, true},
		"pending, block terminating: fail": {Job{State: JobPending, CreatedAt: created}, block(StateActive, true), JobFailed, JobStep{Event: EventJobFailed, Reason: ReasonCapacityEnded}, true},
		"pending, block cancelled: fail":   {Job{State: JobPending, CreatedAt: created}, block(StateCancelled, false), JobFailed, JobStep{Event: EventJobFailed, Reason: ReasonCapacityEnded}, true},
		"pending two days: fail": {Job{State: JobPending, CreatedAt: now.Add(-MaxPending)}, block(StateScheduled, false), JobFailed,
			JobStep{Event: EventJobFailed, Reason: ReasonInsufficientCapacity}, true},
		"running, block active: nothing":        {Job{State: JobRunning}, block(StateActive, false), JobRunning, JobStep{}, false},
		"running, block terminating: interrupt": {Job{State: JobRunning}, block(StateActive, true), JobInterrupted, JobStep{Event: EventJobInterrupted, Stop: true, Reason: ReasonCapacityEnded}, true},
		"interrupted, block expired: fail":      {Job{State: JobInterrupted}, block(StateExpired, false), JobFailed, JobStep{Event: EventJobFailed, Reason: ReasonCapacityEnded}, true},
		"interrupted, still terminating: wait":  {Job{State: JobInterrupted}, block(StateActive, true), JobInterrupted, JobStep{}, false},
		"interrupted, block extended: run":      {Job{State: JobInterrupted}, block(StateActive, false), JobRunning, JobStep{Event: EventJobRunning, Start: true}, true},
		"succeeded: nothing":                    {Job{State: JobSucceeded}, block(StateActive, false), JobSucceeded, JobStep{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, step, ok := DecideJob(tc.job, tc.block, now)
			if got.State != tc.wantState || ok != tc.wantOK {
				t.Errorf("state %s ok %v, want %s %v", got.State, ok, tc.wantState, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantStep, step); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJobExited(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	two := func(done ...int) Job { return Job{State: JobRunning, Run: 1, InstanceCount: 2, Done: done} }
	tests := map[string]struct {
		job          Job
		instance     int
		code         int
		wantOK       bool
		wantState    JobState
		wantDone     []int
		wantRestarts int
		wantRun      int
		wantEvent    string
	}{
		"the only instance, code 0": {Job{State: JobRunning, Run: 1, InstanceCount: 1}, 0, 0, true, JobSucceeded, nil, 0, 1, EventJobSucceeded},
		"first of two, code 0":      {two(), 1, 0, true, JobRunning, []int{1}, 0, 1, ""},
		"second of two, code 0":     {two(1), 0, 0, true, JobSucceeded, nil, 0, 1, EventJobSucceeded},
		"the same instance again":   {two(1), 1, 0, false, JobRunning, []int{1}, 0, 1, ""},
		"code 1, restarts left": {Job{State: JobRunning, Run: 1, InstanceCount: 2, MaxRestarts: 2, Restarts: 1, Done: []int{0}}, 1, 1,
			true, JobRunning, nil, 2, 2, EventJobRestarted},
		"code 1, no restarts left":   {Job{State: JobRunning, Run: 3, MaxRestarts: 2, Restarts: 2}, 0, 1, true, JobFailed, nil, 2, 3, EventJobFailed},
		"exit after an interruption": {Job{State: JobInterrupted, Run: 1, InstanceCount: 1}, 0, 143, false, JobInterrupted, nil, 0, 1, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, step, ok := JobExited(tc.job, tc.instance, tc.code, now)
			if ok != tc.wantOK || got.State != tc.wantState || got.Restarts != tc.wantRestarts || got.Run != tc.wantRun || step.Event != tc.wantEvent {
				t.Errorf("got ok %v %s restarts %d run %d event %q, want %v %s %d %d %q", ok, got.State, got.Restarts, got.Run, step.Event,
					tc.wantOK, tc.wantState, tc.wantRestarts, tc.wantRun, tc.wantEvent)
			}
			if !slices.Equal(got.Done, tc.wantDone) {
				t.Errorf("done %v, want %v", got.Done, tc.wantDone)
			}
		})
	}
	// The caller's job is not changed.
	j := two(1)
	JobExited(j, 0, 0, now)
	if !slices.Equal(j.Done, []int{1}) {
		t.Errorf("JobExited changed its argument's Done: %v", j.Done)
	}
	if _, _, err := StopJob(Job{ID: "job-1", State: JobSucceeded}, now); err == nil {
		t.Error("stopping a finished job succeeded")
	}
	if j, step, err := StopJob(Job{ID: "job-1", State: JobRunning}, now); err != nil || j.State != JobStopped || !step.Stop {
		t.Errorf("stopping a running job: %+v %+v %v", j, step, err)
	}
}

func TestTakeSlots(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pending := Job{ID: "job-b", BlockID: "cb-1", State: JobPending, InstanceCount: 2, CreatedAt: now.Add(-time.Hour)}
	starting := pending
	starting.State, starting.Run = JobRunning, 1
	tests := map[string]struct {
		was, next Job
		count     int
		held      map[int]string
		wantState JobState
		wantSlots []int
		wantStep  JobStep
		wantOK    bool
	}{
		"all free: the lowest slots": {pending, starting, 4, nil, JobRunning, []int{0, 1}, JobStep{Event: EventJobRunning, Start: true}, true},
		"around another job's":       {pending, starting, 4, map[int]string{0: "job-a", 2: "job-a"}, JobRunning, []int{1, 3}, JobStep{Event: EventJobRunning, Start: true}, true},
		"its own slots count as free": {pending, starting, 2, map[int]string{0: "job-b", 1: "job-b"}, JobRunning, []int{0, 1},
			JobStep{Event: EventJobRunning, Start: true}, true},
		"too few free: waits, reason stored": {pending, starting, 2, map[int]string{1: "job-a"}, JobPending, nil, JobStep{}, true},
		"waited too long: fails": {Job{ID: "job-b", BlockID: "cb-1", State: JobPending, InstanceCount: 2, CreatedAt: now.Add(-MaxPending)},
			starting, 2, map[int]string{0: "job-a"}, JobFailed, nil, JobStep{Event: EventJobFailed, Reason: ReasonInsufficientCapacity}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, step, ok := TakeSlots(tc.was, tc.next, tc.count, tc.held, now)
			if got.State != tc.wantState || ok != tc.wantOK {
				t.Errorf("state %s ok %v, want %s %v", got.State, ok, tc.wantState, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantSlots, got.Slots); diff != "" {
				t.Errorf("slots (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStep, step); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
	// Waiting again for the same reason stores nothing new.
	waiting, _, _ := TakeSlots(pending, starting, 1, map[int]string{0: "job-a"}, now)
	if want := "waiting_for_gpus: it needs 2 instances of block cb-1 and 0 are free (job job-a holds the others)"; waiting.Reason != want {
		t.Errorf("reason %q, want %q", waiting.Reason, want)
	}
	if _, _, ok := TakeSlots(waiting, starting, 1, map[int]string{0: "job-a"}, now); ok {
		t.Error("the same wait decided again asks for a new commit")
	}
}
