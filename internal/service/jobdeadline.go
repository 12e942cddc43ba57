package service

import (
	"context"
	"time"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/core"
)

// A job never outlives its block, even when its server is stopped or dies
// for good: each instance starts with a deadline on the wall clock
// (backend.Limits.Deadline), which the engine enforces by itself (the
// local engine's shims: SIGTERM the grace before it, SIGKILL at it), and
// which the leader moves while it lives (renewDeadlines):
//
//   - on the wall clock, the deadline is the end of the run's block (a
//     plan's segment), or, for a preemptible run, the time its GPUs are
//     needed or its team's budget runs out (backfillBlock); an extension
//     moves it;
//   - on a simulated clock, a block's end is no time on the wall clock,
//     and the clock moves only while a server runs: the deadline is a
//     lease, simDeadlineLease from now, renewed while the leader runs.
//     A server that is gone for good leaves its jobs running no longer
//     than that.
//
// While the server runs, it stops jobs before these deadlines itself (30
// minutes before a block's end, a preemption's notice before the GPUs
// are needed); the deadline is for when it does not. A server that comes
// back adopts what is still within its time, and learns how the rest
// ended.

// simDeadlineLease is how long the instances of a server on a simulated
// clock run on without it.
const simDeadlineLease = 2 * time.Minute

// deadlineRenewEvery is how often the leader moves its instances'
// deadlines: well within simDeadlineLease, and soon enough after an
// extension (which comes at least an hour before the end).
const deadlineRenewEvery = 10 * time.Second

// wallDeadline is when an instance whose time ends at end (on the
// service's clock) is ended by its engine if the server does not stop it
// first, on the wall clock.
func (s *Service) wallDeadline(end time.Time) time.Time {
	if _, wall := s.clock.(clock.Wall); wall {
		return end
	}
	return time.Now().Add(simDeadlineLease)
}

// runEnd is when a running job's current run must be gone, on the
// service's clock: its block's end, or its backfill run's.
func (s *Service) runEnd(ctx context.Context, j core.Job) (time.Time, error) {
	if j.Preemptible {
		return s.backfillBlock(j).End, nil
	}
	b, err := s.store.GetBlock(ctx, j.BlockID)
	if err != nil {
		return time.Time{}, err
	}
	return b.End, nil
}

// renewDeadlinesUntil renews the deadlines at once (an adopted
// instance's lease may be about to run out), then every renewEvery, until
// ctx ends (the lead ends).
func (s *Service) renewDeadlinesUntil(ctx context.Context) {
	tick := time.NewTicker(s.jobs.renewEvery())
	defer tick.Stop()
	for {
		s.renewDeadlines(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// renewDeadlines moves the deadline of every instance of a running job
// that this runner watches to what it is now (wallDeadline of runEnd),
// where the engine keeps deadlines and the deadline changed.
func (s *Service) renewDeadlines(ctx context.Context) {
	s.jobs.mu.Lock()
	d, ok := s.jobs.instances.(backend.Deadliner)
	live := map[string][]int{}
	for run, ranks := range s.jobs.live {
		for rank := range ranks {
			live[run] = append(live[run], rank)
		}
	}
	s.jobs.mu.Unlock()
	if !ok || len(live) == 0 {
		return
	}
	jobs, err := s.store.ListJobs(ctx, "", true)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("listing open jobs to renew their deadlines", "err", err)
		}
		return
	}
	for _, j := range jobs {
		key := runKey(j)
		if j.State != core.JobRunning || len(live[key]) == 0 {
			continue // a run that ended or is being stopped keeps the deadline it has
		}
		end, err := s.runEnd(ctx, j)
		if err != nil {
			s.log.Warn("reading when a job's run ends, to renew its deadline", "job", j.ID, "err", err)
			continue
		}
		at := s.wallDeadline(end)
		for _, rank := range live[key] {
			k := instanceKey{key, rank}
			s.jobs.mu.Lock()
			same := s.jobs.deadlines[k].Equal(at)
			s.jobs.mu.Unlock()
			if same {
				continue
			}
			if err := d.SetDeadline(key, rank, at); err != nil {
				s.log.Warn("moving a job instance's deadline", "job", j.ID, "instance", rank, "deadline", at, "err", err)
				continue
			}
			s.jobs.mu.Lock()
			if s.jobs.live[key][rank] { // not ended meanwhile (onExit)
				s.jobs.deadlines[k] = at
			}
			s.jobs.mu.Unlock()
		}
	}
}
