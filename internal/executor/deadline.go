package executor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// An instance's Deadline lives in a file of the state directory,
// <run>.deadline, which the executor writes before it starts the shim
// and again at each SetDeadline, and which the shim reads again every
// deadlineCheckEvery. So the shim ends its instance at the deadline
// however the server fares (stopped, crashed, gone for good), and a
// server that lives can move the deadline: an extension of the block, or
// a server on a simulated clock renewing a lease. The file holds the
// time in RFC 3339, or nothing for no deadline; it is replaced whole, by
// a rename, so that the shim never reads half a time.

// deadlineCheckEvery is how often a shim reads its deadline file again:
// how long a new deadline may take to apply.
const deadlineCheckEvery = time.Second

func (e *Executor) deadlinePath(runID string) string {
	return filepath.Join(e.stateDir, runID+".deadline")
}

// writeDeadline replaces the deadline file at path.
func writeDeadline(path string, at time.Time) error {
	var b []byte
	if !at.IsZero() {
		b = []byte(at.UTC().Format(time.RFC3339Nano))
	}
	if err := writeFileAtomic(path, b); err != nil {
		return fmt.Errorf("writing the deadline: %w", err)
	}
	return nil
}

// readDeadline reads a deadline file; ok is false when there is none or
// it cannot be read, and then the last one read stands.
func readDeadline(path string) (at time.Time, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return time.Time{}, true
	}
	at, err = time.Parse(time.RFC3339Nano, s)
	return at, err == nil
}

// SetDeadline moves the deadline of a running instance (see
// Limits.Deadline); the zero time removes it. The instance's shim applies
// it within deadlineCheckEvery, a SIGTERM already sent excepted. An
// instance that does not run is not an error: there is nothing to end.
func (e *Executor) SetDeadline(jobID string, instance int, at time.Time) error {
	p := e.settled(jobID, instance)
	if p == nil {
		return nil
	}
	// Under the lock, so that the file is written before the run is
	// forgotten (finish) and its files are removed (pump): none is left.
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return fmt.Errorf("moving the deadline of job %s instance %d: %w", jobID, instance, ErrClosed)
	case !p.started || p.exited || e.procs[key{jobID, instance}] != p:
		return nil
	}
	if err := writeDeadline(e.deadlinePath(p.runID), at); err != nil {
		return fmt.Errorf("moving the deadline of job %s instance %d: %w", jobID, instance, err)
	}
	return nil
}
