package executor

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

const (
	// cgroupMount is where the kernel's cgroup file systems are mounted:
	// the cgroup2 file system itself, or a tmpfs holding a mount per version
	// 1 controller.
	cgroupMount = "/sys/fs/cgroup"
	// cgroup2Magic is the file system type of a cgroup2 mount in statfs.
	cgroup2Magic = 0x63677270
	// cgroupSubtree, under the server's own cgroup, holds a cgroup per run.
	cgroupSubtree = "capblock"
	// serverLeaf is the cgroup that the server and its shims move to under
	// cgroup v2 when their cgroup must hand controllers to its children (the
	// "no internal processes" rule). A server that starts in it puts its
	// runs next to it, not under it, so that restarts do not nest.
	serverLeaf = "capblock-server"
)

// v1Controllers are the version 1 controllers that an instance gets a
// cgroup of, in the order that its command joins them: pids comes last,
// because from there on no thread of the joining process may be created
// beyond the limit (see runStage).
var v1Controllers = []string{"freezer", "memory", "pids"}

// cgroupHost is where an Executor creates its runs' cgroups.
type cgroupHost struct {
	version int
	// parents hold the runs' cgroups: one per version 1 controller, in
	// v1Controllers order, or the one of version 2.
	parents []string
}

// findCgroups works out where this process may create cgroups for its runs,
// and what they can do; it returns a nil host, with the reason in
// Isolation, where it may not.
func findCgroups(o options) (*cgroupHost, Isolation) {
	if o.noCgroups {
		return nil, Isolation{Reason: "cgroups were turned off"}
	}
	if os.Geteuid() != 0 {
		return nil, Isolation{Reason: "the server does not run as root"}
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, Isolation{Reason: err.Error()}
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, Isolation{Reason: err.Error()}
	}
	v2At := o.cgroup2At
	if v2At == "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(cgroupMount, &st); err != nil {
			return nil, Isolation{Reason: fmt.Sprintf("reading %s: %v", cgroupMount, err)}
		}
		if st.Type == cgroup2Magic {
			v2At = cgroupMount
		}
	}
	if v2At != "" {
		return findCgroup2(v2At, own, mounts)
	}
	return findCgroup1(own, mounts)
}

func findCgroup1(own map[string]string, mounts []mountPoint) (*cgroupHost, Isolation) {
	h := &cgroupHost{version: 1}
	iso := Isolation{CgroupVersion: 1}
	var missing []string
	for _, ctl := range v1Controllers {
		dir, err := ownDir(own, mounts, ctl)
		if err == nil {
			err = makeParent(filepath.Join(dir, cgroupSubtree))
		}
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		h.parents = append(h.parents, filepath.Join(dir, cgroupSubtree))
		iso.Memory = iso.Memory || ctl == "memory"
		iso.PIDs = iso.PIDs || ctl == "pids"
	}
	iso.Reason = strings.Join(missing, "; ")
	if len(h.parents) == 0 {
		return nil, Isolation{Reason: iso.Reason}
	}
	return h, iso
}

// findCgroup2 prepares cgroup v2. The runs' parent must pass the memory and
// pids controllers on, and so must the server's cgroup above it; but a
// cgroup other than the root cannot both hold processes and pass
// controllers on. Where the server's cgroup holds only capblock's own
// processes (the server and the shims of earlier runs, as in a systemd
// unit with Delegate=yes or a container whose first process is the
// server), they move to a leaf next to the runs, as systemd's
// DelegateSubgroup= would have put them. Where it holds any other process,
// nothing is moved: the runs still get a cgroup each, which is enough to
// end all their processes, but no limits.
func findCgroup2(mount string, own map[string]string, mounts []mountPoint) (*cgroupHost, Isolation) {
	mounts = slices.DeleteFunc(mounts, func(m mountPoint) bool { return m.path != mount })
	dir, err := ownDir(own, mounts, "")
	if err != nil {
		return nil, Isolation{Reason: err.Error()}
	}
	if filepath.Base(dir) == serverLeaf {
		dir = filepath.Dir(dir)
	}
	parent := filepath.Join(dir, cgroupSubtree)
	if err := makeParent(parent); err != nil {
		return nil, Isolation{Reason: err.Error()}
	}
	iso := Isolation{CgroupVersion: 2}
	var problems []string
	for _, ctl := range []string{"memory", "pids"} {
		err := enableController(dir, ctl)
		if err == nil {
			err = enableController(parent, ctl)
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		iso.Memory = iso.Memory || ctl == "memory"
		iso.PIDs = iso.PIDs || ctl == "pids"
	}
	iso.Reason = strings.Join(problems, "; ")
	return &cgroupHost{version: 2, parents: []string{parent}}, iso
}

// enableController makes the cgroup dir pass controller ctl on to its
// children.
func enableController(dir, ctl string) error {
	if hasWord(filepath.Join(dir, "cgroup.subtree_control"), ctl) {
		return nil
	}
	if !hasWord(filepath.Join(dir, "cgroup.controllers"), ctl) {
		return fmt.Errorf("cgroup %s has no %s controller", dir, ctl)
	}
	err := writeCgroupFile(dir, "cgroup.subtree_control", "+"+ctl)
	if errors.Is(err, syscall.EBUSY) {
		if err := moveToLeaf(dir); err != nil {
			return fmt.Errorf("enabling %s in %s: %w", ctl, dir, err)
		}
		err = writeCgroupFile(dir, "cgroup.subtree_control", "+"+ctl)
	}
	if err != nil {
		return fmt.Errorf("enabling %s in %s: %w", ctl, dir, err)
	}
	return nil
}

// moveToLeaf moves the processes of the cgroup dir to its serverLeaf child,
// provided that they are all this server and job shims.
func moveToLeaf(dir string) error {
	pids, err := readPIDs(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if pid != os.Getpid() && !isShim(pid) {
			return fmt.Errorf("it holds process %d, which is not capblock's", pid)
		}
	}
	leaf := filepath.Join(dir, serverLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating %s: %w", leaf, err)
	}
	for _, pid := range pids {
		err := writeCgroupFile(leaf, "cgroup.procs", strconv.Itoa(pid))
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("moving process %d to %s: %w", pid, leaf, err)
		}
	}
	return nil
}

func isShim(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	arg0, _, _ := strings.Cut(string(b), "\x00")
	return err == nil && arg0 == shimArg0
}

// makeParent creates the directory that holds the runs' cgroups and checks
// that cgroups can be created in it.
func makeParent(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	// A process killed while probing leaves its probe behind; another
	// prober may remove this one meanwhile. A probe never holds a process.
	stale, _ := filepath.Glob(filepath.Join(dir, "probe-*"))
	for _, p := range stale {
		_ = os.Remove(p)
	}
	probe := filepath.Join(dir, "probe-"+rand.Text())
	if err := os.Mkdir(probe, 0o755); err != nil {
		return fmt.Errorf("creating a cgroup in %s: %w", dir, err)
	}
	if err := os.Remove(probe); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing cgroup %s: %w", probe, err)
	}
	return nil
}

// ownCgroups reads /proc/self/cgroup: the cgroup path of this process per
// version 1 controller, and under "" its version 2 path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading this process's cgroups: %w", err)
	}
	return parseOwnCgroups(string(b)), nil
}

func parseOwnCgroups(s string) map[string]string {
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			own[ctl] = parts[2]
		}
	}
	return own
}

// mountPoint is a cgroup mount from /proc/self/mountinfo.
type mountPoint struct {
	// root is the cgroup that is mounted, path where.
	root, path string
	// controllers are a version 1 mount's; a cgroup2 mount has none.
	controllers []string
	v2          bool
}

func cgroupMounts() ([]mountPoint, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	return parseMountInfo(string(b)), nil
}

func parseMountInfo(s string) []mountPoint {
	var out []mountPoint
	for _, line := range strings.Split(s, "\n") {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) {
			continue
		}
		m := mountPoint{root: unescapeMount(fields[3]), path: unescapeMount(fields[4])}
		switch fields[sep+1] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			m.controllers = strings.Split(fields[sep+3], ",")
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownDir is the directory of this process's cgroup of controller ctl ("" for
// version 2), found through the mount of its hierarchy.
func ownDir(own map[string]string, mounts []mountPoint, ctl string) (string, error) {
	path, ok := own[ctl]
	name := ctl
	if ctl == "" {
		name = "cgroup2"
	}
	if !ok {
		return "", fmt.Errorf("this process is in no %s cgroup", name)
	}
	for _, m := range mounts {
		if (ctl == "") != m.v2 || (ctl != "" && !slices.Contains(m.controllers, ctl)) {
			continue
		}
		rel, err := filepath.Rel(m.root, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // another part of the hierarchy is mounted here
		}
		return filepath.Join(m.path, rel), nil
	}
	return "", fmt.Errorf("the %s cgroup %s is not mounted", name, path)
}
