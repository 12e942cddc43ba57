package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// procStat is what capblock reads from /proc/<pid>/stat.
type procStat struct {
	state byte // R, S, D, Z, X, ...
	ppid  int
	pgrp  int
	// startTicks is the process's start time in clock ticks since boot. A pid
	// with a different start time is another process that reused the number.
	startTicks uint64
}

// readStat parses /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields are
// counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, b)
}

func parseStat(pid int, b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, fmt.Errorf("parsing /proc/%d/stat: no command name", pid)
	}
	// fields[0] is field 3 (state), fields[1] field 4 (ppid), fields[2]
	// field 5 (pgrp), fields[19]
	// field 22 (starttime).
	fields := strings.Fields(string(b[i+2:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("parsing /proc/%d/stat: %d fields", pid, len(fields))
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parsing /proc/%d/stat ppid: %w", pid, err)
	}
	pgrp, err := strconv.Atoi(fields[2])
	if err != nil {
		return procStat{}, fmt.Errorf("parsing /proc/%d/stat pgrp: %w", pid, err)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parsing /proc/%d/stat starttime: %w", pid, err)
	}
	return procStat{state: fields[0][0], ppid: ppid, pgrp: pgrp, startTicks: start}, nil
}

// alive reports whether pid is still the process that started at startTicks
// and has not exited. A zombie has exited: it only waits for its parent.
func alive(pid int, startTicks uint64) bool {
	st, err := readStat(pid)
	if err != nil {
		return false
	}
	return st.startTicks == startTicks && st.state != 'Z' && st.state != 'X'
}

// readBootID returns the kernel's boot id, which tells state recorded before
// a reboot (whose processes are all gone) from state of this boot. It is ""
// where the kernel does not expose it.
func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitExited blocks until the child pid has exited without reaping it. While
// the exited leader is an unreaped zombie its pid, and so its process-group
// id, cannot be reused: the group can be signalled without hitting another
// process.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("waiting for process %d: %w", pid, errno)
		}
	}
}

// killGroup sends sig to the process group pgid; a group that is already
// gone is not an error.
func killGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal process group %d", pgid)
	}
	err := syscall.Kill(-pgid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending %s to process group %d: %w", signalName(sig), pgid, err)
	}
	return nil
}

// killStrays kills what is left of the process group pgid of a run whose
// shim has exited: the command, if the shim was killed before it, or
// processes the command left behind. The group's leader was not our child,
// so the group id may in principle have been freed and reused; a live
// process whose pid is the group id and whose start time is not the
// leader's means exactly that, and then nothing is killed.
func killStrays(pgid int, leaderStart uint64) error {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	found := false
	for _, d := range dir {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.pgrp != pgid {
			continue
		}
		if pid == pgid && st.startTicks != leaderStart {
			return nil // the group id belongs to a new process now
		}
		found = true
	}
	if !found {
		return nil
	}
	return killGroup(pgid, syscall.SIGKILL)
}

// signalNames names Linux's standard signals, which have the same numbers on
// every architecture capblock runs on.
var signalNames = [...]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP",
	6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1",
	11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
	16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP",
	21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
	26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR",
	31: "SIGSYS",
}

func signalName(sig syscall.Signal) string {
	if int(sig) > 0 && int(sig) < len(signalNames) {
		return signalNames[sig]
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// maxSignal is the highest Linux signal number (SIGRTMAX).
const maxSignal = 64

// exitFromStatus fills in an Exit from an exit status as a shell reports it:
// 128+n means that the command was killed by signal n. Like a shell, capblock
// cannot tell that from a command that chose to exit with 128+n.
func exitFromStatus(x Exit, status int) Exit {
	x.Code = status
	if status > 128 && status <= 128+maxSignal {
		x.Signaled = true
		x.Signal = signalName(syscall.Signal(status - 128))
	}
	return x
}

// exitFromSignal fills in an Exit for a process killed by sig; Code follows
// the shell's 128+n so that every ending by signal reads the same.
func exitFromSignal(x Exit, sig syscall.Signal) Exit {
	x.Code = 128 + int(sig)
	x.Signaled = true
	x.Signal = signalName(sig)
	return x
}
