package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// An instance with Limits.TmpBytes gets /tmp, /dev/shm and /var/tmp of
// its own: one tmpfs of that size, in a mount namespace of the
// instance's, so that what a job writes there is bounded, seen by no
// other instance, and gone with it (the namespace, and the tmpfs with it,
// goes when its last process ends: nothing is left to clean up, even
// after a crash). The stage sets it up as root, before it drops to the
// job's user:
//
//  1. the shim starts the stage in a new mount namespace (CLONE_NEWNS),
//     where Go's runtime marks every mount private, so that nothing
//     mounted there is seen outside and the host's mounts stay as they
//     are;
//  2. the stage mounts a tmpfs of TmpBytes on /tmp and makes in it the
//     directories tmp, shm and var-tmp, each mode 1777 like the host's;
//  3. it binds shm on /dev/shm and var-tmp on /var/tmp where those
//     exist, and last tmp over /tmp itself, which hides the tmpfs's root.
//
// The three share the size. A tmpfs's pages are memory, charged to the
// cgroup of the process that writes them, so they count against
// Limits.MemoryBytes too.

// probeArg0 is the argv[0] under which this executable, started again,
// checks that it can set up a private /tmp (findPrivateTmp).
const probeArg0 = "capblock-job-probe-tmp"

// tmpfsSource names the instances' tmpfs in /proc/mounts.
const tmpfsSource = "capblock-tmp"

// mountPrivateTmp sets up /tmp, /dev/shm and /var/tmp of size bytes in
// the calling process's mount namespace, which must be its own.
func mountPrivateTmp(size int64) error {
	opts := fmt.Sprintf("size=%d,mode=0755", size)
	if err := syscall.Mount(tmpfsSource, "/tmp", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mounting a tmpfs of %d bytes on /tmp: %w", size, err)
	}
	for _, d := range []string{"tmp", "shm", "var-tmp"} {
		path := filepath.Join("/tmp", d)
		if err := os.Mkdir(path, 0o700); err != nil {
			return fmt.Errorf("making %s on the private /tmp: %w", path, err)
		}
		if err := os.Chmod(path, 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("opening %s on the private /tmp to the job: %w", path, err)
		}
	}
	binds := []struct{ from, to string }{{"/tmp/shm", "/dev/shm"}, {"/tmp/var-tmp", "/var/tmp"}, {"/tmp/tmp", "/tmp"}}
	for _, b := range binds {
		if fi, err := os.Stat(b.to); err != nil || !fi.IsDir() {
			continue // this machine has none: nothing of the host's to hide
		}
		if err := syscall.Mount(b.from, b.to, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("mounting the private %s: %w", b.to, err)
		}
	}
	return nil
}

// runProbe is this executable started as probeArg0, in a mount namespace
// of its own: it sets up a small private /tmp, as a stage would, and
// exits 0, or says on stderr why it could not.
func runProbe() int {
	if err := mountPrivateTmp(1 << 20); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// probeLimit bounds the probe; it takes milliseconds.
const probeLimit = 30 * time.Second

// findPrivateTmp reports whether this process can give instances a
// private /tmp (Limits.TmpBytes), and why not: it tries, in a process of
// its own that leaves nothing behind.
func findPrivateTmp(o options) (bool, string) {
	switch {
	case o.noPrivateTmp:
		return false, "private /tmp was turned off"
	case os.Geteuid() != 0:
		return false, "the server does not run as root, and only root can mount a /tmp of a job's own"
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{probeArg0}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) {
				msg = err.Error()
			} else {
				msg = exitErr.String()
			}
		}
		return false, "cannot mount a /tmp of a job's own in a mount namespace of its own: " + msg
	}
	return true, ""
}
