package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// runCgroups are the cgroups of one run. Every process of the run is in
// each of them; Dirs[0] is the one whose cgroup.procs lists them. What a
// directory can do (freeze, kill, limit memory) is told by its files.
type runCgroups struct {
	Version int
	Dirs    []string
}

// create makes the cgroups of a run and sets its limits.
func (h *cgroupHost) create(runID string, l Limits) (runCgroups, error) {
	c := runCgroups{Version: h.version}
	for _, p := range h.parents {
		dir := filepath.Join(p, runID)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.remove()
			return runCgroups{}, fmt.Errorf("creating cgroup: %w", err)
		}
		c.Dirs = append(c.Dirs, dir)
	}
	if err := c.limit(l); err != nil {
		c.remove()
		return runCgroups{}, err
	}
	return c, nil
}

// limit writes the memory and process limits. Under version 1 the memory
// limit covers swap too, where the kernel accounts for it, so that a job
// cannot go past it by swapping.
func (c runCgroups) limit(l Limits) error {
	type setting struct {
		file  string
		value int64
	}
	var settings []setting
	if l.MemoryBytes > 0 {
		settings = append(settings,
			setting{"memory.limit_in_bytes", l.MemoryBytes}, setting{"memory.memsw.limit_in_bytes", l.MemoryBytes},
			setting{"memory.max", l.MemoryBytes}, setting{"memory.swap.max", 0})
	}
	if l.PIDs > 0 {
		settings = append(settings, setting{"pids.max", l.PIDs})
	}
	for _, dir := range c.Dirs {
		for _, s := range settings {
			if _, err := os.Stat(filepath.Join(dir, s.file)); err != nil {
				continue
			}
			if err := writeCgroupFile(dir, s.file, strconv.FormatInt(s.value, 10)); err != nil {
				return fmt.Errorf("setting %s: %w", s.file, err)
			}
		}
	}
	return nil
}

// procFiles are the cgroup.procs files that a process writes its pid to
// in order to join the run.
func (c runCgroups) procFiles() []string {
	var out []string
	for _, dir := range c.Dirs {
		out = append(out, filepath.Join(dir, "cgroup.procs"))
	}
	return out
}

// procs lists the run's processes; a run whose cgroups are gone has none.
// A cgroup removed while its file is read answers ENODEV (cgroup v1), which
// is gone too.
func (c runCgroups) procs() ([]int, error) {
	pids, err := readPIDs(filepath.Join(c.Dirs[0], "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
		return nil, nil
	}
	return pids, err
}

// freezeLimit bounds the wait for a cgroup to freeze; a process in an
// uninterruptible sleep may hold it up, and then the run is signalled as it
// is.
const freezeLimit = time.Second

// freeze stops every process of the run where a freezer is available, so
// that none can fork while they are being signalled, and returns the
// function that thaws them. Signals sent meanwhile are delivered on thaw.
func (c runCgroups) freeze() (thaw func()) {
	for _, dir := range c.Dirs {
		if exists(filepath.Join(dir, "freezer.state")) {
			if writeCgroupFile(dir, "freezer.state", "FROZEN") != nil {
				return func() {}
			}
			waitFor(freezeLimit, func() bool { return readTrimmed(filepath.Join(dir, "freezer.state")) == "FROZEN" })
			return func() { _ = writeCgroupFile(dir, "freezer.state", "THAWED") }
		}
		if exists(filepath.Join(dir, "cgroup.freeze")) {
			if writeCgroupFile(dir, "cgroup.freeze", "1") != nil {
				return func() {}
			}
			waitFor(freezeLimit, func() bool { return hasLine(filepath.Join(dir, "cgroup.events"), "frozen 1") })
			return func() { _ = writeCgroupFile(dir, "cgroup.freeze", "0") }
		}
	}
	return func() {}
}

// thaw lets a run that was left frozen go on.
func (c runCgroups) thaw() {
	for _, dir := range c.Dirs {
		_ = writeCgroupFile(dir, "freezer.state", "THAWED")
		_ = writeCgroupFile(dir, "cgroup.freeze", "0")
	}
}

// signal sends sig to every process of the run at once.
func (c runCgroups) signal(sig syscall.Signal) error {
	thaw := c.freeze()
	defer thaw()
	pids, err := c.procs()
	if err != nil {
		return fmt.Errorf("listing the processes of cgroup %s: %w", c.Dirs[0], err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("sending %s to process %d: %w", signalName(sig), pid, err)
		}
	}
	return nil
}

// killLimit bounds how long kill keeps killing the processes of a run.
const killLimit = 10 * time.Second

// kill ends every process of the run and waits until none is left: with
// cgroup.kill where the kernel has it, and otherwise by freezing the run,
// sending SIGKILL to every process and thawing it, until it is empty.
func (c runCgroups) kill() error {
	if c.Version == 2 && exists(filepath.Join(c.Dirs[0], "cgroup.kill")) {
		err := writeCgroupFile(c.Dirs[0], "cgroup.kill", "1")
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && waitFor(killLimit, func() bool { pids, _ := c.procs(); return len(pids) == 0 }) {
			return nil
		}
	}
	deadline := time.Now().Add(killLimit)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		thaw := c.freeze()
		pids, err := c.procs()
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		thaw()
		switch {
		case err != nil:
			return fmt.Errorf("listing the processes of cgroup %s: %w", c.Dirs[0], err)
		case len(pids) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("%d processes still run in cgroup %s after %v", len(pids), c.Dirs[0], killLimit)
		}
		time.Sleep(delay)
	}
}

// oomKilled reports whether the kernel killed a process of the run for
// going past its memory limit.
func (c runCgroups) oomKilled() bool {
	for _, dir := range c.Dirs {
		for _, file := range []string{"memory.oom_control", "memory.events"} {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if n, ok := strings.CutPrefix(line, "oom_kill "); ok && n != "0" {
					return true
				}
			}
		}
	}
	return false
}

// remove removes the run's cgroups, which must hold no process. A process
// that has just been killed may take a moment to leave.
func (c runCgroups) remove() error {
	var errs []error
	for _, dir := range c.Dirs {
		var err error
		waitFor(2*time.Second, func() bool {
			err = os.Remove(dir)
			return err == nil || !errors.Is(err, syscall.EBUSY)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// exists reports whether any cgroup of the run is still there.
func (c runCgroups) exists() bool {
	return slices.ContainsFunc(c.Dirs, exists)
}

func writeCgroupFile(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func readPIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func readTrimmed(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func hasWord(path, word string) bool {
	return slices.Contains(strings.Fields(readTrimmed(path)), word)
}

func hasLine(path, line string) bool {
	return slices.Contains(strings.Split(readTrimmed(path), "\n"), line)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// waitFor polls cond, more slowly as time passes, until it holds or limit
// has passed; it reports whether it held.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 20*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
}
