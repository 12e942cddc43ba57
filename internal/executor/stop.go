package executor

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Stop sends SIGTERM to every process of the instance and, if the instance
// still runs after grace, kills them all. It returns at once; the end
// arrives on Exits. Stopping an instance that does not run is not an error,
// and stopping it again sends no second SIGTERM but may shorten the grace.
func (e *Executor) Stop(jobID string, instance int, grace time.Duration) error {
	p := e.settled(jobID, instance)
	if p == nil {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("stopping job %s instance %d: %w", jobID, instance, ErrClosed)
	}
	if !p.started || p.exited {
		e.mu.Unlock()
		return nil
	}
	term := !p.termSent
	p.termSent = true
	e.mu.Unlock()

	// Signalling may wait for the run's cgroup to freeze; it is done
	// without the lock.
	if term {
		if err := signalInstance(p, syscall.SIGTERM); err != nil {
			e.mu.Lock()
			p.termSent = false
			e.mu.Unlock()
			return fmt.Errorf("stopping job %s instance %d: %w", jobID, instance, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || p.exited {
		return nil
	}
	killAt := time.Now().Add(max(grace, 0))
	if p.killTimer == nil || killAt.Before(p.killAt) {
		if p.killTimer != nil {
			p.killTimer.Stop()
		}
		p.killAt = killAt
		p.killTimer = time.AfterFunc(time.Until(killAt), func() { e.kill(p) })
	}
	return nil
}

// kill ends the grace period of a stopped instance.
func (e *Executor) kill(p *proc) {
	e.mu.Lock()
	if e.closed || p.exited {
		e.mu.Unlock()
		return
	}
	p.killed = true
	e.mu.Unlock()
	if err := signalInstance(p, syscall.SIGKILL); err != nil {
		e.mu.Lock()
		p.killErr = fmt.Errorf("killing job %s instance %d: %w", p.inst.JobID, p.inst.Instance, err)
		e.mu.Unlock()
	}
}

// signalInstance sends sig to every process of an instance: through its
// cgroups (SIGKILL ends them all, and waits until they have gone), or
// where it has none to the command's process group, once the group's
// leader is checked to be the command still: the shim may have reaped it,
// and the group id could then belong to another process.
func signalInstance(p *proc, sig syscall.Signal) error {
	if len(p.cgroups.Dirs) > 0 {
		if sig == syscall.SIGKILL {
			return p.cgroups.kill()
		}
		return p.cgroups.signal(sig)
	}
	if !alive(p.inst.PGID, p.leaderTicks) {
		return nil
	}
	return killGroup(p.inst.PGID, sig)
}

// Running lists the instances that run, by job id and rank.
func (e *Executor) Running() []Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Instance
	for _, p := range e.procs {
		if p.started && !p.exited {
			out = append(out, p.inst)
		}
	}
	slices.SortFunc(out, func(a, b Instance) int {
		if c := strings.Compare(a.JobID, b.JobID); c != 0 {
			return c
		}
		return a.Instance - b.Instance
	})
	return out
}

// settled returns the process of an instance once its start has settled
// (p.ready: started, or failed to), or nil when the instance does not
// run. It holds e.mu only to look it up.
func (e *Executor) settled(jobID string, instance int) *proc {
	e.mu.Lock()
	p := e.procs[key{jobID, instance}]
	e.mu.Unlock()
	if p != nil {
		<-p.ready
	}
	return p
}
