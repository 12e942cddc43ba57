package slurm_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"capblock/internal/backend/slurm"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/service"
	"capblock/internal/slurmtest"
	"capblock/internal/store/sqlite"
)

// TestServiceJobs runs a job through the service over SQLite on a real
// Slurm, as `capblock jobs run` does: on a 2-node block bought and
// active, its 2 instances are one batch job in the block's reservation,
// each sees its rank and GPUs, and the job succeeds with their ends;
// its logs read through the service.
func TestServiceJobs(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	teamName := func(ctx context.Context, id string) (string, error) {
		team, err := st.Team(ctx, id)
		return team.Name, err
	}
	be := newBackend(t, c, slurm.Config{Teams: map[string]slurm.Access{"ml": {Users: []string{"nobody"}}}, TeamName: teamName})
	wl, err := slurm.NewWorkloads(be, slurm.JobsConfig{Dir: jobsDir(t), Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The service's clock starts an hour before this hour, so that the
	// block it sells from this hour on is in Slurm's present: its
	// reservation is active, and the job runs at once.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	sim := clock.NewSim(t0)
	svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: be, Workloads: wl, Clock: sim,
		Log: slog.New(slog.DiscardHandler), EnginePoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// 1. A 2-node block, bought and active.
	team, b := runAndBuy(t, svc, t0, "slurm-jobs-1")
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the block is active", func() bool { return state(t, svc, team.ID, b.ID) == core.StateActive })
	eventually(t, "its reservation is active", func() bool {
		res, ok := reservation(t, c, b.ID)
		return ok && res.State == "ACTIVE"
	})

	// 2. The job: one batch job of 2 tasks, which succeeds.
	job, err := svc.CreateJob(ctx, "", contract.JobRequest{BlockID: b.ID, InstanceCount: 2,
		Command: []string{"/bin/sh", "-c", `echo "rank $RANK of $WORLD_SIZE, GPUs $CUDA_VISIBLE_DEVICES, block $CAPBLOCK_BLOCK_ID"`}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		j, err := svc.GetJob(ctx, "", job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == core.JobSucceeded {
			break
		}
		if j.State.Final() || time.Now().After(deadline) {
			t.Fatalf("the job is %s (run %d), want succeeded", j.State, j.Run)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if jobs := slurmJobs(t, c, job.ID+"/1"); len(jobs) != 1 {
		t.Errorf("Slurm jobs of the run: %v, want one", jobs)
	}
	for rank := range 2 {
		log, _, err := svc.JobLogs(ctx, "", job.ID, rank, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("rank %d of 2, GPUs 0,1,2,3,4,5,6,7, block %s\n", rank, b.ID)
		if string(log) != want {
			t.Errorf("the log of instance %d: %q, want %q", rank, log, want)
		}
	}
}
