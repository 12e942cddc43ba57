package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/core"
	"capblock/internal/store/sqlite"
)

// crashingWorkloads runs jobs as processes of this machine, and kills its
// own process with SIGKILL at the first instance's start: before the
// start, or once the instance runs.
type crashingWorkloads struct {
	*local.Workloads
	crash string // "before" or "after"
}

func (c crashingWorkloads) Open() (backend.Instances, error) {
	ins, err := c.Workloads.Open()
	return crashingInstances{Instances: ins, crash: c.crash}, err
}

type crashingInstances struct {
	backend.Instances
	crash string
}

func (c crashingInstances) Start(ctx context.Context, w backend.Workload) error {
	if c.crash == "before" {
		killSelf()
	}
	err := c.Instances.Start(ctx, w)
	if c.crash == "after" {
		killSelf()
	}
	return err
}

const jobStartChildEnv = "CAPBLOCK_E2E_JOB_START_CHILD"

// TestJobStartKill9Child is the server that TestJobStartKill9 kills: it
// buys a block, moves the clock to its start, creates a job on it, and
// dies by SIGKILL in the start of the job's instance that the job's
// commit stored.
func TestJobStartKill9Child(t *testing.T) {
	dir := os.Getenv(jobStartChildEnv)
	if dir == "" {
		t.Skip("run by TestJobStartKill9")
	}
	lw, err := local.NewWorkloads(filepath.Join(dir, "jobs"), false)
	if err != nil {
		t.Fatal(err)
	}
	engine := fileEngine{path: filepath.Join(dir, "engine")}
	e, _, _ := outboxStack(t, filepath.Join(dir, "capblock.db"), engine, crashingWorkloads{Workloads: lw, crash: os.Getenv(outboxCrashEnv)})
	start := t0.Add(time.Hour)
	o := e.exact(searchQuery("l4.1x", 1, 2, start, start.Add(4*time.Hour)), 2, start)
	b, code := e.buy(o.OfferingID, "kill9-job")
	if code != 201 {
		t.Fatalf("purchase: status %d", code)
	}
	e.advance(time.Hour)
	var j job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{filepath.Join(dir, "job.sh")}}, &j); code != 201 {
		t.Fatalf("creating the job: %d", code)
	}
	<-time.After(30 * time.Second) // a deadline: the kill comes long before
	t.Fatal("the instance was not started within 30s of the job's creation")
}

// TestJobStartKill9: a server killed by SIGKILL between the commit that
// made a job running and the record that its instance started (before
// the engine started it, or after) leaves the start pending; the next
// server on the same file and jobs directory applies it, and the
// instance runs once: started by the new server, or adopted from the
// dead one (or found ended), not started again. The job succeeds without a restart.
func TestJobStartKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server process and kills it")
	}
	for _, crash := range []string{"before", "after"} {
		t.Run("killed "+crash+" the engine starts the instance", func(t *testing.T) {
			dir := t.TempDir()
			marks := filepath.Join(dir, "marks")
			script := `#!/bin/sh
echo "$$" >> "` + marks + `"
`
			if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			// 1. The child dies by SIGKILL in the instance's start.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestJobStartKill9Child$", "-test.v")
			cmd.Env = append(os.Environ(), jobStartChildEnv+"="+dir, outboxCrashEnv+"="+crash)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the server was not killed by SIGKILL: %v\n%s", err, out)
			}
			if crash == "after" {
				// The instance ran and ended while no server watched:
				// a start applied again must not run it again.
				for deadline := time.Now().Add(10 * time.Second); len(readLines(marks)) == 0; time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the instance the dead server started never ran")
					}
				}
				time.Sleep(300 * time.Millisecond)
			}
			// 2. The job is running and its instance's start pending.
			db := filepath.Join(dir, "capblock.db")
			jobID, startID := pendingStart(t, db)
			// 3. The new server applies it, and the job ends once.
			lw, err := local.NewWorkloads(filepath.Join(dir, "jobs"), false)
			if err != nil {
				t.Fatal(err)
			}
			e, done, _ := outboxStack(t, db, fileEngine{path: filepath.Join(dir, "engine")}, lw)
			waitAction(t, done, startID)
			got := waitJob(t, e, jobID, func(j job) bool { return j.State != "running" })
			if got.State != "succeeded" || got.Restarts != 0 {
				t.Errorf("the job after the restart: %+v; want succeeded, no restart", got)
			}
			if pids := readLines(marks); len(pids) != 1 {
				t.Errorf("the instance ran %d times (pids %v); want once", len(pids), pids)
			}
		})
	}
}

// pendingStart reads, from the SQLite file db, the one job stored and the
// id of its instance's start, failing unless the job is running and the
// start pending without a failed try.
func pendingStart(t *testing.T, db string) (jobID, actionID string) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, err := st.ListJobs(t.Context(), "", true)
	if err != nil || len(jobs) != 1 || jobs[0].State != core.JobRunning {
		t.Fatalf("jobs after the kill: %+v, %v; want one, running", jobs, err)
	}
	as, err := st.ActionsFor(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Kind != core.ActionStartInstance || as[0].State != core.ActionPending || as[0].Attempts != 0 {
		t.Fatalf("actions of %s after the kill: %+v; want its instance's start, pending, untried", jobs[0].ID, as)
	}
	return jobs[0].ID, as[0].ID
}
