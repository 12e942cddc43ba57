package slurm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/slurm"
	"capblock/internal/core"
	"capblock/internal/slurmtest"
)

// TestWorkloads runs capblock's jobs on a real Slurm, in an active
// 2-node block's reservation: a run of 2 instances is one batch job of
// 2 tasks, submitted once however many Starts; each task sees the
// environment contract with Slurm's GPUs; the ends come with their
// codes; a stop ends a running job; a new Open adopts a running job.
func TestWorkloads(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	ctx := t.Context()
	be := newBackend(t, c, slurm.Config{})
	blk := block("cb-jobs", time.Now().Add(-time.Hour), time.Now().Add(2*time.Hour), "sim0", "sim1")
	blk.State = core.StateActive
	if err := be.Activate(ctx, blk); err != nil {
		t.Fatal(err)
	}
	dir := jobsDir(t)
	wl, err := slurm.NewWorkloads(be, slurm.JobsConfig{Dir: dir, Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in, err := wl.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	workload := func(run string, size, rank int, command ...string) backend.Workload {
		job, _, _ := strings.Cut(run, "/")
		return backend.Workload{JobID: job, Run: run, Rank: rank, WorldSize: size, Block: blk, GPUsPerInstance: 8,
			Command: command, Env: map[string]string{"GREETING": "hello"}, Team: "team-1"}
	}
	start := func(run string, size int, command ...string) {
		t.Helper()
		for rank := range size {
			if err := in.Start(ctx, workload(run, size, rank, command...)); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("a run of 2 instances", func(t *testing.T) {
		show := `echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES CAPBLOCK_BLOCK_ID=$CAPBLOCK_BLOCK_ID GREETING=$GREETING USER=$(id -un)"`
		start("job-a/0", 2, "/bin/sh", "-c", show)
		// Applied again, as after a crash: nothing more is submitted.
		if err := in.Start(ctx, workload("job-a/0", 2, 0, "/bin/sh", "-c", show)); err != nil {
			t.Fatal(err)
		}
		jobs := slurmJobs(t, c, "job-a/0")
		if len(jobs) != 1 {
			t.Fatalf("Slurm jobs of run job-a/0: %v, want one", jobs)
		}
		got := awaitExits(t, in, 2)
		want := map[string]int{"job-a/0 0": 0, "job-a/0 1": 0}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("exits (-want +got):\n%s", diff)
		}
		// Its nodes are read from its TRES: a job completing lists only
		// the nodes that have not finished yet in NumNodes.
		job := c.Scontrol(t, "--oneliner", "show", "job", jobs[0])
		for _, field := range []string{"Reservation=cb-jobs", ",node=2,", "NumTasks=2", "UserId=nobody("} {
			if !strings.Contains(job, field) {
				t.Errorf("the run's Slurm job lacks %s: %s", field, job)
			}
		}
		for rank := range 2 {
			log, next, err := wl.ReadLog(ctx, "job-a", rank, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("RANK=%d WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 CAPBLOCK_BLOCK_ID=cb-jobs GREETING=hello USER=nobody\n", rank)
			if string(log) != want || next != int64(len(want)) {
				t.Errorf("log of instance %d: %q up to %d, want %q", rank, log, next, want)
			}
			if tail, _, err := wl.ReadLog(ctx, "job-a", rank, -4, 0); err != nil || string(tail) != "ody\n" {
				t.Errorf("the last 4 bytes of instance %d's log: %q, %v", rank, tail, err)
			}
		}
		if log, next, err := wl.ReadLog(ctx, "job-none", 0, 0, 0); err != nil || len(log) != 0 || next != 0 {
			t.Errorf("the log of a job not started: %q, %d, %v; want empty at 0", log, next, err)
		}
	})

	t.Run("a team without a Slurm user", func(t *testing.T) {
		w := workload("job-u/0", 1, 0, "true")
		w.Team = "team-2"
		if err := in.Start(ctx, w); !errors.Is(err, backend.ErrPermanent) {
			t.Errorf("a run of a team the fleet file does not map: %v, want ErrPermanent", err)
		}
		if jobs := slurmJobs(t, c, "job-u/0"); len(jobs) != 0 {
			t.Errorf("Slurm jobs of the unmapped team's run: %v", jobs)
		}
	})

	t.Run("a failing command", func(t *testing.T) {
		start("job-b/0", 2, "/bin/sh", "-c", `exit $((3 + RANK))`)
		got := awaitExits(t, in, 2)
		if diff := cmp.Diff(map[string]int{"job-b/0 0": 3, "job-b/0 1": 4}, got); diff != "" {
			t.Errorf("exits (-want +got):\n%s", diff)
		}
	})

	t.Run("a task killed before it wrote its status", func(t *testing.T) {
		// The command kills its task's shell: the status is the job's.
		start("job-k/0", 1, "/bin/sh", "-c", `kill -KILL $PPID`)
		got := awaitExits(t, in, 1)
		if code := got["job-k/0 0"]; code == 0 {
			t.Errorf("the exit of a killed task: %d, want a failure", code)
		} else {
			t.Logf("the exit of a killed task: %d", code)
		}
	})

	t.Run("a stop", func(t *testing.T) {
		start("job-c/0", 2, "sleep", "600")
		eventually(t, "the run's job runs", func() bool { return runState(t, c, "job-c/0") == "RUNNING" })
		time.Sleep(time.Second) // its tasks started
		for rank := range 2 {
			if err := in.Stop("job-c/0", rank, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		got := awaitExits(t, in, 2)
		if diff := cmp.Diff(map[string]int{"job-c/0 0": 143, "job-c/0 1": 143}, got); diff != "" {
			t.Errorf("exits after a stop (-want +got):\n%s", diff)
		}
	})

	t.Run("a stop of a run that ignores SIGTERM", func(t *testing.T) {
		start("job-i/0", 1, "/bin/sh", "-c", `trap '' TERM; sleep 600`)
		eventually(t, "the run's job runs", func() bool { return runState(t, c, "job-i/0") == "RUNNING" })
		id := slurmJobs(t, c, "job-i/0")[0]
		if err := in.Stop("job-i/0", 0, 4*time.Second); err != nil {
			t.Fatal(err)
		}
		// Slurm itself ends the job at the grace, should capblock stop.
		if end := jobEnd(t, c, id); end.After(time.Now().Add(5*time.Second)) || end.Before(time.Now().Add(2*time.Second)) {
			t.Errorf("the stopped job ends at %v, want at the end of the 4 s grace", end)
		}
		got := awaitExits(t, in, 1)
		if code := got["job-i/0 0"]; code <= 128 {
			t.Errorf("the exit of a run killed after its grace: %d, want a signal's", code)
		}
	})

	t.Run("submitted, then its record lost", func(t *testing.T) {
		// A server that stopped between sbatch and its record: the next
		// finds the job by its name in squeue.
		start("job-e/0", 1, "sleep", "600")
		if err := os.Remove(filepath.Join(dir, "runs", "job-e", "run-0")); err != nil {
			t.Fatal(err)
		}
		in.Close()
		var err error
		if in, err = wl.Open(); err != nil {
			t.Fatal(err)
		}
		start("job-e/0", 1, "sleep", "600")
		if jobs := slurmJobs(t, c, "job-e/0"); len(jobs) != 1 {
			t.Errorf("Slurm jobs of run job-e/0 after a Start applied again: %v, want one", jobs)
		}
		if err := in.Stop("job-e/0", 0, time.Second); err != nil {
			t.Fatal(err)
		}
		awaitExits(t, in, 1)
	})

	t.Run("adopted by a new Open", func(t *testing.T) {
		start("job-d/0", 2, "sleep", "600")
		eventually(t, "the run's job runs", func() bool { return runState(t, c, "job-d/0") == "RUNNING" })
		in.Close()
		var err error
		if in, err = wl.Open(); err != nil {
			t.Fatal(err)
		}
		adopted, err := in.Adopt()
		if err != nil {
			t.Fatal(err)
		}
		want := []backend.RunningInstance{{Run: "job-d/0", Instance: 0}, {Run: "job-d/0", Instance: 1}}
		if diff := cmp.Diff(want, adopted); diff != "" {
			t.Errorf("adopted (-want +got):\n%s", diff)
		}
		if err := in.Stop("job-d/0", 1, time.Second); err != nil {
			t.Fatal(err)
		}
		if got := awaitExits(t, in, 2); len(got) != 2 {
			t.Errorf("exits of the adopted run: %v", got)
		}
	})
}

// TestWorkloadsRetry: a submission that Slurm refuses for now (the
// block's reservation is not made yet) is tried again within the Start,
// and succeeds once the reservation is there.
func TestWorkloadsRetry(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{})
	ctx := t.Context()
	be := newBackend(t, c, slurm.Config{})
	wl, err := slurm.NewWorkloads(be, slurm.JobsConfig{Dir: jobsDir(t), Poll: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in, err := wl.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	blk := block("cb-late", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "sim0")
	blk.State = core.StateActive
	go func() {
		time.Sleep(500 * time.Millisecond)
		if err := be.Activate(context.Background(), blk); err != nil {
			t.Error(err)
		}
	}()
	w := backend.Workload{JobID: "job-r", Run: "job-r/0", WorldSize: 1, Block: blk, GPUsPerInstance: 8, Command: []string{"true"}, Team: "team-1"}
	if err := in.Start(ctx, w); err != nil {
		t.Fatalf("a Start while the reservation is being made: %v", err)
	}
	if got := awaitExits(t, in, 1); got["job-r/0 0"] != 0 {
		t.Errorf("exits: %v", got)
	}
}

// jobsDir is a jobs directory that the cluster's users can reach.
func jobsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "capblock-slurm-jobs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// slurmJobs are the ids of the Slurm jobs named name.
func slurmJobs(t *testing.T, c *slurmtest.Cluster, name string) []string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "squeue", "--noheader", "--states=all", "--name="+name, "--format=%A")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// runState is the state of the Slurm job named run.
func runState(t *testing.T, c *slurmtest.Cluster, run string) string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "squeue", "--noheader", "--states=all", "--name="+run, "--format=%T")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// awaitExits receives n exits, as "run instance" → code.
func awaitExits(t *testing.T, in backend.Instances, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	timeout := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case x := <-in.Exits():
			if x.Err != nil {
				t.Logf("exit of %s %d: %v", x.JobID, x.Instance, x.Err)
			}
			got[fmt.Sprintf("%s %d", x.JobID, x.Instance)] = x.Code
		case <-timeout:
			t.Fatalf("exits after 60 s: %v, want %d", got, n)
		}
	}
	return got
}
