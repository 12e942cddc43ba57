package slurm

import "context"

// ExpandHostlist is expandHostlist, for the side by side's check of what
// each reservation holds.
var ExpandHostlist = expandHostlist

// Scontrol runs a reservation command as the backend runs it: in a
// session, or in a process of its own (Config.Scontrol).
func (b *Backend) Scontrol(ctx context.Context, args ...string) (string, error) {
	return b.scontrol(ctx, args...)
}

// SessionPIDs are the process ids of the backend's scontrol sessions
// whose process has not ended; nil without sessions.
func (b *Backend) SessionPIDs() []int {
	if b.sessions == nil {
		return nil
	}
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	var pids []int
	for s := range b.sessions.live {
		if s.alive() {
			pids = append(pids, s.cmd.Process.Pid)
		}
	}
	return pids
}

// Commands is how many reservation commands the backend has run.
func (b *Backend) Commands() int64 { return b.commands.Load() }

// Polls is how many convergence passes the backend has done.
func (b *Backend) Polls() int64 { return b.polls.Load() }

// KeepVersionsInMemory makes the backend record the blocks' versions
// only in its memory, as on a cluster with a burst buffer plugin. Call
// it before the backend's first write.
func (b *Backend) KeepVersionsInMemory() { b.versionsInSlurm = false }
