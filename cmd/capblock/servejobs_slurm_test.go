package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"capblock/internal/client"
	"capblock/internal/slurmtest"
)

// TestServeSlurmJobs: serve --backend slurm --slurm-job-dir runs a job
// of team ml through the API as a batch job of its block's reservation,
// as Slurm user nobody: both instances succeed, and their logs read back
// with their ranks and Slurm's GPUs.
func TestServeSlurmJobs(t *testing.T) {
	// An earlier serve of this process left its umask, 077: the
	// cluster's files must be readable by the job's user, as a real
	// cluster's slurm.conf is.
	syscall.Umask(0o022)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(slurmFleet), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs, err := os.MkdirTemp("", "capblock-serve-jobs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(jobs) })
	if err := os.Chmod(jobs, 0o755); err != nil { // nobody reaches it
		t.Fatal(err)
	}
	// The simulated clock starts an hour before this hour, so that a
	// block from this hour on is in Slurm's present.
	hour := time.Now().UTC().Truncate(time.Hour)
	api := freeAddr(t)
	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() {
		done <- runApp(runCtx, nil, "serve", "--db", filepath.Join(dir, "capblock.db"), "--listen", api, "--log-level", "warn",
			"--fleet", fleetFile, "--sim-clock", "--sim-start", hour.Add(-time.Hour).Format(time.RFC3339), "--engine-poll", "1s",
			"--backend", "slurm", "--slurm-conf", c.Conf, "--slurm-job-dir", jobs)
	}()
	t.Cleanup(func() {
		stop()
		if r := <-done; r.code != 0 {
			t.Errorf("serve: exit %d, %s", r.code, r.stderr)
		}
	})
	for {
		r, err := http.Get("http://" + api + "/healthz")
		if err == nil {
			r.Body.Close()
			break
		}
		select {
		case r := <-done:
			t.Fatalf("serve stopped: exit %d, %s", r.code, r.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	token, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New("http://"+api, client.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// 1. A block of team ml, from this hour for two, active.
	team, err := cl.CreateTeam(ctx, "ml")
	if err != nil {
		t.Fatal(err)
	}
	offs, err := cl.Offerings(ctx, client.OfferingsQuery{InstanceTypes: []string{"h100.8x"}, InstanceCount: 2, DurationHours: 2,
		StartAfter: hour, EndBefore: hour.Add(2 * time.Hour)})
	if err != nil || len(offs) == 0 {
		t.Fatalf("offerings: %v, %v", offs, err)
	}
	b, err := cl.Buy(ctx, client.BuyRequest{OfferingID: offs[0].OfferingID, ClientToken: "t1", Team: team.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AdvanceClock(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}

	// 2. A job of both instances, which succeeds.
	var job client.Job
	deadline := time.Now().Add(90 * time.Second)
	for {
		// Refused until the block is active.
		job, err = cl.CreateJob(ctx, client.JobRequest{BlockID: b.ID, InstanceCount: 2,
			Command: []string{"/bin/sh", "-c", `echo "rank $RANK of $WORLD_SIZE on GPUs $CUDA_VISIBLE_DEVICES as $(id -un)"`}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the job: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		j, err := cl.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == "succeeded" {
			break
		}
		if j.State == "failed" || j.State == "stopped" || time.Now().After(deadline) {
			for _, f := range []string{"instance-0.log", "instance-1.log", "run-1.batch.log"} {
				b, _ := os.ReadFile(filepath.Join(jobs, "logs", job.ID, f))
				t.Logf("%s: %s", f, b)
			}
			t.Fatalf("the job is %s (%s), want succeeded", j.State, j.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for rank := range 2 {
		log, err := cl.JobLogs(ctx, job.ID, rank, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("rank %d of 2 on GPUs 0,1,2,3,4,5,6,7 as nobody\n", rank); log.Data != want {
			t.Errorf("the log of instance %d: %q, want %q", rank, log.Data, want)
		}
	}
}
