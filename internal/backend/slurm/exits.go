package slurm

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"capblock/internal/backend"
)

// active reports whether a job in state has not ended: its tasks may
// still run, or start.
func active(state string) bool {
	switch state {
	case "", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT":
		return false
	}
	return true
}

// states reads the state of the watched runs' jobs that squeue lists
// (it lists an ended job for MinJobAge, 300 s by default), by Slurm job
// id; it asks for them by name, so that its cost follows capblock's
// runs, not the cluster's jobs.
func (in *instances) states(ctx context.Context) (map[string]string, error) {
	in.mu.Lock()
	names := make([]string, 0, len(in.runs))
	for run := range in.runs {
		names = append(names, run)
	}
	in.mu.Unlock()
	states := map[string]string{}
	if len(names) == 0 {
		return states, nil
	}
	slices.Sort(names)
	out, err := in.wl.be.run(ctx, "squeue", "--noheader", "--all", "--states=all", "--name="+strings.Join(names, ","), "--format=%A|%T|%k")
	if err != nil {
		return nil, fmt.Errorf("reading the jobs of capblock's runs: %w", err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) == 3 && f[2] == jobComment {
			states[f[0]] = f[1]
		}
	}
	return states, nil
}

// taskExit reads the exit status that instance r of run w wrote.
func (wl *Workloads) taskExit(w *watched, r int) (int, bool) {
	root, err := os.OpenRoot(wl.logDir(w.jobID))
	if err != nil {
		return 0, false
	}
	defer root.Close()
	b, err := root.ReadFile(fmt.Sprintf("run-%d.exit-%d", w.n, r))
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return code, err == nil
}

// poll reads the watched runs' jobs every Poll until Close, and reports
// the instances that ended.
func (in *instances) poll() {
	t := time.NewTicker(in.wl.cfg.Poll)
	defer t.Stop()
	for {
		if err := in.report(); err != nil && in.ctx.Err() == nil {
			in.wl.be.log.Warn("reading the jobs of capblock's runs; trying again", "err", err)
		}
		select {
		case <-in.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report sends the end of each watched instance that has ended: one
// whose task wrote its status, as soon as it has; the others once
// their job has ended, with the job's status (exitEnd).
func (in *instances) report() error {
	ctx, cancel := context.WithTimeout(in.ctx, time.Minute)
	defer cancel()
	states, err := in.states(ctx)
	if err != nil {
		return err
	}
	in.mu.Lock()
	runs := make(map[string]*watched, len(in.runs))
	for k, w := range in.runs {
		runs[k] = w
	}
	in.mu.Unlock()
	for run, w := range runs {
		state := states[w.slurmID]
		var jobEnd *backend.InstanceExit
		for r := range w.size {
			in.mu.Lock()
			done := w.ended[r]
			in.mu.Unlock()
			if done {
				continue
			}
			x := backend.InstanceExit{JobID: run, Instance: r}
			if code, ok := in.wl.taskExit(w, r); ok {
				x.Code = code
			} else if active(state) {
				continue
			} else {
				if jobEnd == nil {
					e := in.jobExit(ctx, w.slurmID, state)
					jobEnd = &e
				}
				x.Code, x.Err = jobEnd.Code, jobEnd.Err
			}
			switch in.starts.Verdict(run, r) {
			case backend.HoldEnd:
				continue
			case backend.ReportEnd:
				select {
				case in.exits <- x:
				case <-in.ctx.Done():
					return nil // the next server reports it
				}
			}
			_ = os.WriteFile(fmt.Sprintf("%s.ended-%d", in.wl.runFile(w.jobID, w.n), r), nil, 0o644)
			in.mu.Lock()
			w.ended[r] = true
			if len(w.ended) == w.size {
				delete(in.runs, run)
				in.starting.Delete(run) // a Start applied again finds the run's record
			}
			in.mu.Unlock()
		}
	}
	return nil
}

// jobExit is the status of an instance whose task wrote none (killed
// before it could, or never started), from its job as `scontrol show
// job` keeps it (jobFieldsExit).
func (in *instances) jobExit(ctx context.Context, id, state string) backend.InstanceExit {
	out, err := in.wl.be.run(ctx, "scontrol", "--oneliner", "show", "job", id)
	if err != nil {
		return backend.InstanceExit{Code: -1, Err: fmt.Errorf("Slurm job %s ended (%s) and its status is no longer kept: %w", id, cmp.Or(state, "gone"), err)}
	}
	code, err := jobFieldsExit(id, jobFields(out))
	return backend.InstanceExit{Code: code, Err: err}
}

// jobFieldsExit is the exit status of a job's instance from the job's
// fields: its ExitCode, 128+n for a signal n; 137 for a job that ended
// otherwise than COMPLETED with status 0 (its tasks were killed); -1,
// with why, for a job that never ran or shows no status.
func jobFieldsExit(id string, r map[string]string) (int, error) {
	state := r["JobState"]
	if state == "" {
		return -1, fmt.Errorf("Slurm job %s ended and shows no status", id)
	}
	if r["StartTime"] == "Unknown" || r["RunTime"] == "00:00:00" && state == "CANCELLED" {
		return -1, fmt.Errorf("Slurm job %s was %s before it ran (%s)", id, state, r["Reason"])
	}
	code, sig, _ := strings.Cut(r["ExitCode"], ":")
	c, err1 := strconv.Atoi(code)
	s, err2 := strconv.Atoi(sig)
	switch {
	case err1 != nil || err2 != nil:
		return -1, fmt.Errorf("Slurm job %s ended %s with exit code %q", id, state, r["ExitCode"])
	case s > 0:
		return 128 + s, fmt.Errorf("Slurm job %s ended %s by signal %d", id, state, s)
	case c == 0 && state != "COMPLETED":
		return 137, fmt.Errorf("Slurm job %s ended %s before the instance's task did", id, state)
	case state != "COMPLETED" && state != "FAILED":
		return c, fmt.Errorf("Slurm job %s ended %s", id, state)
	}
	return c, nil
}

// jobFields reads the one-word fields of `scontrol --oneliner show job`
// (JobState, ExitCode, StartTime, RunTime, Reason, …), the first of
// each name: a job's record holds free text (its command, its comment)
// that parseRecords' reading of nodes would take for fields.
func jobFields(out string) map[string]string {
	f := map[string]string{}
	line, _, _ := strings.Cut(out, "\n")
	for _, word := range strings.Fields(line) {
		if k, v, ok := strings.Cut(word, "="); ok {
			if _, seen := f[k]; !seen {
				f[k] = v
			}
		}
	}
	return f
}
