package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
//     exist, and last tmp over /tmp itself, which hides the tmpfs's root;
//  4. a jobs directory may itself be under /tmp (a demo's, a test's):
//     the directories the server made for the job (its working
//     directory, and its notices where it has them) are bound back at
//     their paths, each through a descriptor opened before step 2, with
//     the directories above them made on the tmpfs, mode 0711 and the
//     server's, so that the job passes through them and sees nothing
//     else of the host's /tmp. Nothing the job names itself is bound
//     back: a directory of the host's that the job may write to (such
//     as the world-writable /tmp/.X11-unix) would let it write past its
//     size.
//
// The three share the size. A tmpfs's pages are memory, charged to the
// cgroup of the process that writes them, so they count against
// Limits.MemoryBytes too.

// probeArg0 is the argv[0] under which this executable, started again,
// checks that it can set up a private /tmp (findPrivateTmp).
const probeArg0 = "capblock-job-probe-tmp"

// tmpfsSource names the instances' tmpfs in /proc/mounts.
const tmpfsSource = "capblock-tmp"

// oPath is O_PATH of open(2), which package syscall lacks; it is the same
// on the architectures capblock runs on (amd64, arm64).
const oPath = 0x200000

// privateDirs are the directories that an instance's private /tmp
// covers.
var privateDirs = []string{"/tmp", "/dev/shm", "/var/tmp"}

// mountPrivateTmp sets up /tmp, /dev/shm and /var/tmp of size bytes in
// the calling process's mount namespace, which must be its own, and binds
// back the directories of keep that they cover (absolute, clean paths).
func mountPrivateTmp(size int64, keep []string) error {
	// 1. Hold on to what is kept, before it is covered.
	type kept struct {
		path string
		fd   int
	}
	var keeps []kept
	defer func() {
		for _, k := range keeps {
			syscall.Close(k.fd)
		}
	}()
	for _, path := range keep {
		if !covered(path) {
			continue
		}
		fd, err := syscall.Open(path, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("opening %s to keep it under the private /tmp: %w", path, err)
		}
		keeps = append(keeps, kept{path, fd})
	}

	// 2. Cover them.
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

	// 3. Bind back what is kept.
	for _, k := range keeps {
		if err := mkdirPassable(k.path); err != nil {
			return fmt.Errorf("making %s under the private /tmp: %w", k.path, err)
		}
		if err := syscall.Mount(fmt.Sprintf("/proc/self/fd/%d", k.fd), k.path, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("keeping %s under the private /tmp: %w", k.path, err)
		}
	}
	return nil
}

// covered reports whether a private /tmp hides path.
func covered(path string) bool {
	for _, d := range privateDirs {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// mkdirPassable makes path and the directories above it that are
// missing, each mode 0711: others pass through, and list nothing.
func mkdirPassable(path string) error {
	if fi, err := os.Lstat(path); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", path)
		}
		return nil
	}
	if err := mkdirPassable(filepath.Dir(path)); err != nil {
		return err
	}
	if err := os.Mkdir(path, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Chmod(path, 0o711)
}

// runProbe is this executable started as probeArg0, in a mount namespace
// of its own: it sets up a small private /tmp, as a stage would, and
// exits 0, or says on stderr why it could not.
func runProbe() int {
	if err := mountPrivateTmp(1<<20, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// probeLimit bounds the probe; it takes milliseconds.
const probeLimit = 30 * time.Second

// findPrivateTmp reports whether this process can give instances a
// private /tmp (Limits.TmpBytes), and why not: it tries once, in a
// process of its own that leaves nothing behind (probePrivateTmp).
func findPrivateTmp(o options) (bool, string) {
	switch {
	case o.noPrivateTmp:
		return false, "private /tmp was turned off"
	case os.Geteuid() != 0:
		return false, "the server does not run as root, and only root can mount a /tmp of a job's own"
	}
	return probePrivateTmpOnce()
}

// probePrivateTmpOnce is probePrivateTmp, run once per process: what the
// machine allows does not change while a server runs.
var probePrivateTmpOnce = sync.OnceValues(probePrivateTmp)

// probePrivateTmp tries to set up a private /tmp in a process of its own.
func probePrivateTmp() (bool, string) {
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

// keptDirs are the directories of the server's for a job that stay
// visible under its private /tmp (see step 4 above): its working
// directory, and the directory of its CAPBLOCK_KILL_AT_FILE where that is
// the server's and the job cannot write to it (the variable is the
// server's when JobEnv sets it, but a job on a block may set it itself).
func keptDirs(workDir string, env map[string]string) []string {
	var keep []string
	if workDir != "" {
		keep = append(keep, filepath.Clean(workDir))
	}
	if f := env["CAPBLOCK_KILL_AT_FILE"]; filepath.IsAbs(f) {
		d := filepath.Dir(filepath.Clean(f))
		fi, err := os.Lstat(d)
		if st, ok := statOf(fi); err == nil && fi.IsDir() && ok && st.Uid == uint32(os.Geteuid()) && fi.Mode().Perm()&0o022 == 0 {
			keep = append(keep, d)
		}
	}
	return keep
}

func statOf(fi os.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}
