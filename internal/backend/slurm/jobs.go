package slurm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"capblock/internal/core"
)

// resvJob is a job of a reservation as squeue lists it.
type resvJob struct {
	id    string
	state string    // PENDING, RUNNING, COMPLETING, …
	end   time.Time // its expected end; zero when unknown (pending)
}

// jobsIn lists the jobs of reservation name that have not ended.
func (b *Backend) jobsIn(ctx context.Context, name string) ([]resvJob, error) {
	out, err := b.run(ctx, "squeue", "--noheader", "--reservation="+name, "--format=%A|%T|%e")
	if err != nil {
		return nil, fmt.Errorf("listing the jobs of reservation %s: %w", name, err)
	}
	return parseJobs(out), nil
}

// parseJobs reads squeue's "%A|%T|%e" lines.
func parseJobs(out string) []resvJob {
	var jobs []resvJob
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 || f[0] == "" {
			continue
		}
		j := resvJob{id: f[0], state: f[1]}
		if t, err := time.ParseInLocation(slurmTime, f[2], time.UTC); err == nil {
			j.end = t
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// Terminate stops the block's jobs ahead of its end, without waiting
// for them: each running job gets SIGTERM (its batch script and its
// steps), and its end is brought forward to now + Grace, so that Slurm
// itself ends it then (SIGTERM, then SIGKILL after KillWait) even if
// capblock stops meanwhile; pending jobs are cancelled, since no new
// work starts in a terminating block. A job whose end is already within
// the grace is left alone: that is how a second call, after a crash,
// signals no job twice. Release cancels what is left at the end. A
// termination older than the version this process holds of the block
// is refused (fenced; Slurm's record is not read, since Terminate
// writes no reservation).
func (b *Backend) Terminate(ctx context.Context, blk core.Block) error {
	return b.fenced("terminate", blk, b.terminate(ctx, blk))
}

func (b *Backend) terminate(ctx context.Context, blk core.Block) error {
	if err := b.checkHeld(blk); err != nil {
		return err
	}
	b.hold(blk.ID, blk.Version)
	jobs, err := b.jobsIn(ctx, blk.ID)
	if err != nil {
		return err
	}
	deadline := b.cfg.Now().Add(b.cfg.Grace).UTC().Truncate(time.Second)
	var signal, pending []string
	for _, j := range jobs {
		switch j.state {
		case "PENDING":
			pending = append(pending, j.id)
		case "RUNNING", "SUSPENDED", "CONFIGURING":
			if j.end.IsZero() || j.end.After(deadline) {
				signal = append(signal, j.id)
			}
		}
	}
	if len(signal) > 0 {
		if err := b.scancel(ctx, append([]string{"--signal=TERM", "--full"}, signal...)...); err != nil {
			return fmt.Errorf("signalling the jobs of reservation %s: %w", blk.ID, err)
		}
		for _, id := range signal {
			_, err := b.run(ctx, "scontrol", "update", "JobId="+id, "EndTime="+deadline.Format(slurmTime))
			if err != nil && !ended(err) {
				return fmt.Errorf("bringing the end of job %s of reservation %s forward: %w", id, blk.ID, err)
			}
		}
	}
	if len(pending) > 0 {
		if err := b.scancel(ctx, pending...); err != nil {
			return fmt.Errorf("cancelling the pending jobs of reservation %s: %w", blk.ID, err)
		}
	}
	if len(signal)+len(pending) > 0 {
		b.log.Info("terminating the jobs of a block's Slurm reservation", "block", blk.ID, "signalled", signal, "cancelled", pending, "endBy", deadline)
	}
	return nil
}

// Release deletes the block's reservation after cancelling the jobs
// left in it (Slurm refuses to delete a reservation in use). It waits
// up to ReleaseWait for them to end; if some have not, it fails, and
// the outbox calls it again. A reservation already gone (deleted, or
// ended: Slurm purges a reservation at its end) is released.
//
// A release older than the version the engine holds of the block (the
// reservation's record, read first, or this process's memory) is
// refused (fenced). Once deleted, the reservation records nothing in
// Slurm; this process keeps the version released, so that its own late
// writes of the block are refused, and a reservation re-created by
// another process's late write is deleted by the leader's convergence
// (converge.go), the block being no longer live.
func (b *Backend) Release(ctx context.Context, blk core.Block) error {
	lock := b.locks.of(blk.ID)
	lock.Lock()
	defer lock.Unlock()
	return b.fenced("release", blk, b.release(ctx, blk))
}

func (b *Backend) release(ctx context.Context, blk core.Block) error {
	if err := b.checkHeld(blk); err != nil {
		return err
	}
	have, found, err := b.show(ctx, blk.ID)
	if err != nil {
		return err
	}
	if found {
		if err := checkRecorded(have, reservation{name: blk.ID, version: blk.Version}); err != nil {
			return err
		}
	}
	b.hold(blk.ID, blk.Version)
	jobs, err := b.jobsIn(ctx, blk.ID)
	if err != nil {
		return err
	}
	if len(jobs) > 0 {
		ids := make([]string, len(jobs))
		for i, j := range jobs {
			ids[i] = j.id
		}
		if err := b.scancel(ctx, ids...); err != nil {
			return fmt.Errorf("cancelling the jobs of reservation %s: %w", blk.ID, err)
		}
		if err := b.awaitNoJobs(ctx, blk.ID); err != nil {
			return err
		}
	}
	_, err = b.scontrol(ctx, "delete", "ReservationName="+blk.ID)
	b.setKnown(blk.ID, false)
	b.forget(blk.ID)
	switch {
	case err == nil:
		b.log.Info("deleted a block's Slurm reservation", "block", blk.ID)
		return nil
	case slurmSays(err, "Requested reservation is invalid"), slurmSays(err, "not found"):
		return nil
	default:
		return fmt.Errorf("deleting reservation %s: %w", blk.ID, err)
	}
}

// awaitNoJobs polls until reservation name has no job left, for at most
// ReleaseWait.
func (b *Backend) awaitNoJobs(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.ReleaseWait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := b.jobsIn(ctx, name)
		if err == nil && len(jobs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cancelled jobs of reservation %s have not all ended after %v (%d left); it is deleted once they have", name, b.cfg.ReleaseWait, len(jobs))
		case <-tick.C:
		}
	}
}

// scancel runs scancel on jobs; a job that ended meanwhile is not an
// error.
func (b *Backend) scancel(ctx context.Context, args ...string) error {
	_, err := b.run(ctx, "scancel", args...)
	if err != nil && !ended(err) {
		return err
	}
	return nil
}

// ended reports whether err says that the job has ended already.
func ended(err error) bool {
	return slurmSays(err, "already completing or completed") || slurmSays(err, "Invalid job id specified") ||
		slurmSays(err, "Job has already finished")
}
