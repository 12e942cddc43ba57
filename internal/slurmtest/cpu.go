package slurmtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: Linux fixes
// it at 100 per second for user space, whatever the kernel's own tick.
const userHZ = 100

// ControllerCPU is the CPU time slurmctld has used so far, all its
// threads, user and system (utime + stime of /proc/<pid>/stat), to the
// hundredth of a second: read before and after some work, the difference
// is what the work cost the controller.
func (c *Cluster) ControllerCPU() (time.Duration, error) {
	for _, p := range c.procs.Procs() {
		if p.Name == "slurmctld" {
			return processCPU(p.Pid())
		}
	}
	return 0, fmt.Errorf("reading slurmctld's CPU time: the cluster has no slurmctld")
}

// processCPU reads the CPU time of process pid from /proc.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from 3 (state) start after its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("reading the CPU time of process %d: no command name in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("reading the CPU time of process %d: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
