// Package slurmtest runs a real Slurm cluster for a test, on one host:
// munged with a key and socket of its own, slurmctld, and one slurmd per
// node, each node with GPUs that are character devices of the test's
// folder (nothing opens them). Nodes beyond those can be declared
// without a slurmd, for large fleets: Slurm knows them (reservations may
// name them) but they never respond. Everything runs as child processes
// of the test, in a temporary folder, on free loopback ports, and stops
// when the test ends.
//
//	func TestX(t *testing.T) {
//		c := slurmtest.Start(t, slurmtest.Options{Nodes: 3, GPUs: 8})
//		out, err := c.Run(t.Context(), "root", "scontrol", "show", "nodes")
//		…
//	}
//
// It needs root (slurmd runs jobs as their users; the devices need
// mknod) and Debian's Slurm 22.05 and munge (scripts/slurm-setup.sh).
// Without them the test skips, except under CI=true, where it fails: CI
// must run it (.ci/run calls the setup script).
package slurmtest

import (
	"capblock/internal/testproc"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DefaultTZ is the time zone that the cluster's daemons and Run's
// commands see unless Options.TZ says otherwise: five and a half hours
// east of UTC, written so that it needs no tz database, so that a time
// that capblock writes or reads in the wrong zone is off by an amount no
// rounding to the hour hides.
const DefaultTZ = "<+0530>-05:30"

// ErrNotInstalled is why tests skip where Slurm or munge is missing.
var ErrNotInstalled = errors.New("Slurm 22.05 and munge not found; run scripts/slurm-setup.sh (as root)")

// daemons are the programs Start runs; commands, those Run may call.
var (
	daemons  = []string{"munged", "slurmctld", "slurmd"}
	commands = []string{"scontrol", "sbatch", "squeue", "scancel", "sinfo"}
)

// Options shape a cluster; the zero value is one node of 8 GPUs.
type Options struct {
	// Nodes is how many nodes run a slurmd (default 1).
	Nodes int
	// Declared is how many more nodes slurm.conf declares without a
	// slurmd: Slurm knows them, they never respond (not responding, then
	// down after SlurmdTimeout). For fleets larger than one host runs.
	Declared int
	// GPUs is each node's GPU count (default 8), of type GPUType
	// (default "h100"): the GRES gpu:h100:8.
	GPUs    int
	GPUType string
	// Prefix names the nodes Prefix0, Prefix1, … (default "sim"); the
	// nodes with a slurmd come first.
	Prefix string
	// Features gives node i its Slurm features (such as "rack=r1"); nil
	// gives none.
	Features func(i int) []string
	// Cluster is Slurm's ClusterName (default "capblock").
	Cluster string
	// Partition is the one partition, holding every node (default "gpu").
	Partition string
	// TZ is the time zone of the daemons and of Run (default DefaultTZ).
	TZ string
	// KillWait is the time between a cancelled job's SIGTERM and
	// SIGKILL (default 2 s; Slurm's own default is 30 s).
	KillWait time.Duration
	// StartTimeout bounds the wait for every node to be idle (default
	// 60 s).
	StartTimeout time.Duration
}

// Cluster is one running Slurm cluster.
type Cluster struct {
	// Conf is the path of its slurm.conf: SLURM_CONF for its commands.
	Conf string
	// Nodes are the nodes with a slurmd, Declared those without, by name.
	Nodes    []string
	Declared []string
	// Name is its ClusterName; Partition its one partition.
	Name      string
	Partition string

	dir   string
	tz    string
	procs testproc.Group
}

// Start starts a cluster for tb and stops it when tb ends: every node
// with a slurmd is idle when it returns. It skips tb where the cluster
// cannot run here, unless CI=true.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if err := available(); err != nil {
		if os.Getenv("CI") != "true" {
			tb.Skip(err.Error())
		}
		tb.Fatal(err)
	}
	opts = opts.withDefaults()
	c, err := start(tb, opts)
	if err != nil {
		if c != nil {
			c.logTails(tb)
		}
		tb.Fatal(err)
	}
	return c
}

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.GPUs <= 0 {
		o.GPUs = 8
	}
	if o.GPUType == "" {
		o.GPUType = "h100"
	}
	if o.Prefix == "" {
		o.Prefix = "sim"
	}
	if o.Cluster == "" {
		o.Cluster = "capblock"
	}
	if o.Partition == "" {
		o.Partition = "gpu"
	}
	if o.TZ == "" {
		o.TZ = DefaultTZ
	}
	if o.KillWait <= 0 {
		o.KillWait = 2 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = time.Minute
	}
	return o
}

// available says why a cluster cannot run here, or nil.
func available() error {
	if os.Geteuid() != 0 {
		return errors.New("a Slurm cluster in tests needs root (slurmd runs jobs as their users; the fake GPUs need mknod)")
	}
	for _, name := range append(append([]string{}, daemons...), commands...) {
		if _, err := lookPath(name); err != nil {
			return fmt.Errorf("%w (%s: %v)", ErrNotInstalled, name, err)
		}
	}
	return nil
}

// lookPath finds a program in $PATH or in /usr/sbin, where Debian puts
// the daemons and which a user's $PATH may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return exec.LookPath(filepath.Join("/usr/sbin", name))
}

// start writes the configuration and starts the daemons; on an error it
// returns the cluster so far (stopped at tb's cleanup) for its logs.
func start(tb testing.TB, opts Options) (*Cluster, error) {
	// 1. A folder of its own, short (slurmd's sockets live in it, and a
	// socket path holds at most 107 bytes), that other users can
	// traverse: jobs run as them read slurm.conf and reach munge.
	dir, err := os.MkdirTemp("", "slurmtest-")
	if err != nil {
		return nil, fmt.Errorf("making the cluster's folder: %w", err)
	}
	c := &Cluster{Conf: filepath.Join(dir, "slurm.conf"), Name: opts.Cluster, Partition: opts.Partition, dir: dir, tz: opts.TZ}
	tb.Cleanup(func() {
		c.stop()
		if tb.Failed() {
			c.logTails(tb)
		}
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		return c, err
	}
	// 2. Ports, nodes and files.
	ports, err := testproc.FreePorts(2 + opts.Nodes)
	if err != nil {
		return c, err
	}
	l := layout{dir: dir, cluster: opts.Cluster, ctldPort: ports[0], deadPort: ports[1], gpus: opts.GPUs, gpuType: opts.GPUType,
		killWait: max(1, int(opts.KillWait/time.Second)), partition: opts.Partition}
	for i := range opts.Nodes + opts.Declared {
		n := nodeSpec{name: opts.Prefix + strconv.Itoa(i)}
		if i < opts.Nodes {
			n.port = ports[2+i]
			c.Nodes = append(c.Nodes, n.name)
		} else {
			c.Declared = append(c.Declared, n.name)
		}
		if opts.Features != nil {
			n.features = opts.Features(i)
		}
		l.nodes = append(l.nodes, n)
	}
	if err := c.writeFiles(l); err != nil {
		return c, err
	}
	// 3. munged, slurmctld (no saved state: -c), then the slurmds.
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()
	if err := c.startMunge(ctx); err != nil {
		return c, err
	}
	if err := c.run("slurmctld", "slurmctld", "-D", "-c", "-i"); err != nil {
		return c, err
	}
	for _, n := range c.Nodes {
		if err := c.run("slurmd-"+n, "slurmd", "-D", "-N", n); err != nil {
			return c, err
		}
	}
	// 4. Every node with a slurmd idle.
	return c, c.waitIdle(ctx)
}

// writeFiles writes the configuration, the munge key, the GPUs'
// devices and the daemons' folders.
func (c *Cluster) writeFiles(l layout) error {
	for _, d := range []string{"state", "dev", "munge"} {
		if err := os.Mkdir(filepath.Join(c.dir, d), 0o755); err != nil {
			return fmt.Errorf("making the cluster's folders: %w", err)
		}
	}
	for _, n := range c.Nodes {
		if err := os.MkdirAll(filepath.Join(c.dir, "spool", n), 0o755); err != nil {
			return fmt.Errorf("making %s's spool: %w", n, err)
		}
	}
	// The NVIDIA driver's major number; gres.conf needs character
	// devices, which slurmd only stats.
	for i := range l.gpus {
		dev := filepath.Join(c.dir, "dev", "nvidia"+strconv.Itoa(i))
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, int(mkdev(195, uint32(i)))); err != nil {
			return fmt.Errorf("making the fake GPU %s: %w", dev, err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("making the munge key: %w", err)
	}
	files := []struct {
		name string
		data string
		mode os.FileMode
	}{
		{"slurm.conf", slurmConf(l), 0o644},
		{"gres.conf", gresConf(l), 0o644},
		{"cgroup.conf", cgroupConf, 0o644},
		{"munge/munge.key", string(key), 0o400},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(c.dir, f.name), []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", f.name, err)
		}
	}
	return nil
}

// mkdev is Linux's device number of (major, minor).
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0xfff)<<8 | uint64(minor&0xff) | uint64(minor&^0xff)<<12 | uint64(major&^0xfff)<<32
}

// startMunge runs a munged of the cluster's own, so that tests running
// at the same time (and the host's munge, if any) do not share a key or
// a socket; slurm.conf's AuthInfo points Slurm at its socket.
func (c *Cluster) startMunge(ctx context.Context) error {
	m := filepath.Join(c.dir, "munge")
	socket := filepath.Join(m, "munge.socket")
	if err := c.run("munged", "munged", "--foreground", "--force",
		"--socket="+socket, "--key-file="+filepath.Join(m, "munge.key"),
		"--pid-file="+filepath.Join(m, "munged.pid"), "--seed-file="+filepath.Join(m, "munged.seed"),
		"--log-file="+filepath.Join(m, "munged.log")); err != nil {
		return err
	}
	return c.poll(ctx, "waiting for munged's socket", func() (bool, error) {
		_, err := os.Stat(socket)
		return err == nil, nil
	})
}

// waitIdle waits until every node with a slurmd is idle, without a
// flag such as DRAIN or INVAL.
func (c *Cluster) waitIdle(ctx context.Context) error {
	var last string
	err := c.poll(ctx, "waiting for the nodes to be idle", func() (bool, error) {
		out, err := c.Run(ctx, "", "sinfo", "--noheader", "--Node", "--format=%N %T")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = string(out)
		idle := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(last), "\n") {
			if name, state, ok := strings.Cut(line, " "); ok && state == "idle" {
				idle[name] = true
			}
		}
		for _, n := range c.Nodes {
			if !idle[n] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

// Env is the environment of the cluster's commands: SLURM_CONF, and its
// time zone.
func (c *Cluster) Env() []string {
	return []string{"SLURM_CONF=" + c.Conf, "TZ=" + c.tz}
}

// Location is the cluster's time zone, in which Run's commands print
// and read times.
func (c *Cluster) Location() *time.Location {
	if c.tz == DefaultTZ {
		return time.FixedZone("+0530", 5*3600+1800)
	}
	loc, err := time.LoadLocation(c.tz)
	if err != nil {
		return time.UTC
	}
	return loc
}

// Command returns a Slurm command of the cluster (scontrol, sbatch,
// squeue, scancel, sinfo), run as user ("" or "root": root; another
// user needs the test to run as root) in the cluster's environment.
func (c *Cluster) Command(ctx context.Context, userName, name string, args ...string) (*exec.Cmd, error) {
	path, err := lookPath(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), c.Env()...)
	if userName != "" && userName != "root" {
		u, err := user.Lookup(userName)
		if err != nil {
			return nil, fmt.Errorf("running %s as %s: %w", name, userName, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = os.TempDir()
		cmd.Env = append(cmd.Env, "HOME="+u.HomeDir, "USER="+userName)
	}
	return cmd, nil
}

// Run runs a Slurm command as user (see Command) and returns its
// standard output; an error carries what it wrote (scontrol writes some
// refusals, such as "Reservation x not found", on its standard output).
func (c *Cluster) Run(ctx context.Context, userName, name string, args ...string) ([]byte, error) {
	cmd, err := c.Command(ctx, userName, name, args...)
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		said := strings.TrimSpace(stderr.String() + " " + string(out))
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, said)
	}
	return out, nil
}

// Scontrol runs scontrol as root and fails tb on an error.
func (c *Cluster) Scontrol(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := c.Run(tb.Context(), "", "scontrol", args...)
	if err != nil {
		tb.Fatal(err)
	}
	return string(out)
}
