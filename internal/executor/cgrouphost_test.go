package executor

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOwnDir(t *testing.T) {
	// This process's cgroups and the cgroup mounts it sees, as they are
	// read from /proc/self/cgroup and /proc/self/mountinfo.
	hybrid := struct{ cgroup, mounts string }{
		cgroup: "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/process_api/5664\n2:cpu,cpuacct:/x\n0::/\n",
		mounts: `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`,
	}
	unified := struct{ cgroup, mounts string }{
		cgroup: "0::/system.slice/capblock.service\n",
		mounts: "30 24 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
	}
	// A container without a cgroup namespace sees its own cgroup mounted
	// at the controller's usual place.
	container := struct{ cgroup, mounts string }{
		cgroup: "5:memory:/docker/abc\n",
		mounts: `700 690 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:15 - cgroup cgroup rw,memory
701 690 0:40 /docker/abc /mnt/with\040space rw - cgroup cgroup rw,pids
`,
	}
	tests := map[string]struct {
		cgroup, mounts, ctl string
		want                string
	}{
		"v1 memory":                 {hybrid.cgroup, hybrid.mounts, "memory", "/sys/fs/cgroup/memory/process_api/5664"},
		"v1 freezer":                {hybrid.cgroup, hybrid.mounts, "freezer", "/sys/fs/cgroup/freezer"},
		"co-mounted controllers":    {hybrid.cgroup, hybrid.mounts, "cpuacct", "/sys/fs/cgroup/cpu,cpuacct/x"},
		"v2 beside v1":              {hybrid.cgroup, hybrid.mounts, "", "/sys/fs/cgroup/unified"},
		"v2":                        {unified.cgroup, unified.mounts, "", "/sys/fs/cgroup/system.slice/capblock.service"},
		"a mounted subtree":         {container.cgroup, container.mounts, "memory", "/sys/fs/cgroup/memory"},
		"an escaped mount point":    {"5:pids:/docker/abc/x\n", container.mounts, "pids", "/mnt/with space/x"},
		"not in the mounted part":   {"5:memory:/other\n", container.mounts, "memory", ""},
		"no cgroup of a controller": {unified.cgroup, unified.mounts, "memory", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ownDir(parseOwnCgroups(tc.cgroup), parseMountInfo(tc.mounts), tc.ctl)
			if tc.want == "" {
				if err == nil {
					t.Errorf("ownDir = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ownDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// Under cgroup v2 the server's cgroup can pass controllers on only once it
// holds no process: capblock's own move to a leaf, but nothing else does,
// and a server that starts in that leaf uses its parent.
func TestCgroup2MovesOnlyCapblockProcessesToALeaf(t *testing.T) {
	const mount = "/sys/fs/cgroup/unified"
	needRoot(t, "to move processes between cgroups")
	if !fileExists(filepath.Join(mount, "cgroup.procs")) {
		t.Skip("needs a cgroup2 mount beside version 1 controllers, at " + mount)
	}
	own := parseOwnCgroups(readTrimmed("/proc/self/cgroup"))
	server := filepath.Join(mount, "capblock-test-"+rand.Text())
	if err := os.Mkdir(server, 0o755); err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(server, serverLeaf)
	// 1. Put this process, and another, in the test's server cgroup.
	moveTo := func(dir string, pid int) {
		t.Helper()
		if err := writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			t.Fatalf("moving %d to %s: %v", pid, dir, err)
		}
	}
	t.Cleanup(func() {
		moveTo(filepath.Join(mount, own[""]), os.Getpid())
		for _, dir := range []string{filepath.Join(server, cgroupSubtree), leaf, server} {
			os.Remove(dir)
		}
	})
	sleep := func(arg0 string) *exec.Cmd {
		t.Helper()
		cmd := &exec.Cmd{Path: "/bin/sleep", Args: []string{arg0, "1000"}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		moveTo(server, cmd.Process.Pid)
		return cmd
	}
	moveTo(server, os.Getpid())
	other := sleep("sleep")

	// 2. Another process stays put, and so does this one.
	if err := moveToLeaf(server); err == nil || !strings.Contains(err.Error(), strconv.Itoa(other.Process.Pid)) {
		t.Errorf("moveToLeaf with another process = %v, want an error naming it", err)
	}
	if pids, _ := readPIDs(filepath.Join(server, "cgroup.procs")); !slices.Contains(pids, os.Getpid()) {
		t.Errorf("this process left %s: %v", server, pids)
	}

	// 3. This process and a shim move.
	other.Process.Kill()
	other.Wait()
	shim := sleep(shimArg0)
	// A process this one starts meanwhile (another goroutine of the test
	// binary) lands in the server's cgroup too: wait until it is gone.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pids, _ := readPIDs(filepath.Join(server, "cgroup.procs"))
		if !slices.ContainsFunc(pids, func(p int) bool { return p != os.Getpid() && p != shim.Process.Pid }) {
			break
		}
	}
	if err := moveToLeaf(server); err != nil {
		t.Fatalf("moveToLeaf: %v", err)
	}
	got, _ := readPIDs(filepath.Join(leaf, "cgroup.procs"))
	want := []int{os.Getpid(), shim.Process.Pid}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("processes in %s (-want +got):\n%s", leaf, diff)
	}

	// 4. From the leaf, runs go next to it.
	host, iso := findCgroup2(mount, parseOwnCgroups(readTrimmed("/proc/self/cgroup")), must(cgroupMounts()))
	if host == nil || iso.CgroupVersion != 2 {
		t.Fatalf("findCgroup2 from the leaf = %+v, %+v", host, iso)
	}
	if want := []string{filepath.Join(server, cgroupSubtree)}; !slices.Equal(host.parents, want) {
		t.Errorf("runs go under %v, want %v", host.parents, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
