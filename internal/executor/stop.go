package executor

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Stop sends SIGTERM to the instance's process group and, if the instance
// still runs after grace, SIGKILL. It returns at once; the end arrives on
// Exits. Stopping an instance that does not run is not an error, and
// stopping it again sends no second SIGTERM but may shorten the grace.
func (e *Executor) Stop(jobID string, instance int, grace time.Duration) error {
	e.mu.Lock()
	p := e.procs[key{jobID, instance}]
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	<-p.ready
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("stopping job %s instance %d: %w", jobID, instance, ErrClosed)
	}
	if !p.started || p.exited {
		return nil
	}
	if !p.termSent {
		if err := e.signalLocked(p, syscall.SIGTERM); err != nil {
			return fmt.Errorf("stopping job %s instance %d: %w", jobID, instance, err)
		}
		p.termSent = true
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
	defer e.mu.Unlock()
	if e.closed || p.exited {
		return
	}
	if err := e.signalLocked(p, syscall.SIGKILL); err != nil {
		p.killErr = fmt.Errorf("killing job %s instance %d: %w", p.inst.JobID, p.inst.Instance, err)
		return
	}
	p.killed = true
}

// signalLocked signals an instance's group. An exited child is not reaped
// before p.exited is set, so its group id cannot have been reused here. An
// adopted leader is checked against its start time first; the poller will
// notice one that has gone.
func (e *Executor) signalLocked(p *proc, sig syscall.Signal) error {
	if p.inst.Adopted && !alive(p.inst.PID, p.startTicks) {
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
