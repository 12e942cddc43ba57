package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/backend/slurm"
	"capblock/internal/executor"
	"capblock/internal/service"
)

// jobsConfig decides how this server runs jobs. With --backend
// kubernetes, as Indexed Jobs on the cluster (kubeJobsConfig); with
// --backend slurm, as batch jobs of the blocks' reservations when
// --slurm-job-dir is given, else not at all (users submit with sbatch).
// Else as
// processes of this machine: as root, each team's jobs run as a user of
// their own, in cgroups, with limits; as another user the server cannot
// isolate them, and runs none unless told to run them as itself with
// --allow-unisolated-jobs. Isolated jobs get a /tmp of their own
// (--job-tmp-size), or none run; unisolated ones share the host's, since
// they may write wherever the server may.
func jobsConfig(f serveFlags, dir string) (service.Config, error) {
	var cfg service.Config
	switch f.backend {
	case "kubernetes":
		return kubeJobsConfig(f.kubeJobs)
	case "slurm":
		// The work runs on the cluster's nodes, not on this machine.
		if f.slurm.jobDir == "" {
			cfg.JobsOff = "with --backend slurm, capblock runs jobs as batch jobs of the block's reservation once --slurm-job-dir names a folder that this host and the nodes share; else submit them with sbatch --reservation=<block id> (docs/slurm.md)"
		}
		return cfg, nil
	}
	limits, err := jobLimits(f, dir)
	if err != nil {
		return cfg, err
	}
	r, err := parseUIDRange(f.jobUIDs)
	if err != nil {
		return cfg, err
	}
	isolation := executor.Probe()
	switch {
	case isolation.CgroupVersion > 0 && limits.MemoryBytes > 0 && !isolation.Memory:
		return cfg, usageError(fmt.Errorf("--job-memory-limit needs the cgroups' memory controller, which this machine does not offer (%s); pass --job-memory-limit 0 to run jobs without it", isolation.Reason))
	case isolation.CgroupVersion > 0 && limits.PIDs > 0 && !isolation.PIDs:
		return cfg, usageError(fmt.Errorf("--job-pids-limit needs the cgroups' pids controller, which this machine does not offer (%s); pass --job-pids-limit 0 to run jobs without it", isolation.Reason))
	}
	switch {
	case f.unisolatedJobs:
		if isolation.CgroupVersion == 0 {
			limits.MemoryBytes, limits.PIDs = 0, 0 // nothing to apply them with
		}
		limits.TmpBytes = 0 // they run as the server's user, and may fill what it may
		cfg.JobsDir, cfg.JobLimits = dir, limits
	case os.Geteuid() == 0 && isolation.CgroupVersion == 0:
		cfg.JobsOff = fmt.Sprintf("it cannot put jobs in cgroups of their own on this machine (%s); start it with --allow-unisolated-jobs to run jobs as its own user, uncontained (see Security model in the README)", isolation.Reason)
	case os.Geteuid() == 0 && limits.TmpBytes > 0 && !isolation.PrivateTmp:
		cfg.JobsOff = fmt.Sprintf("it cannot give jobs a /tmp of their own on this machine (%s); start it with --job-tmp-size 0 to let jobs share the host's /tmp, unbounded (see Security model in the README)", isolation.TmpReason)
	case os.Geteuid() == 0:
		if err := service.CheckJobsDirReachable(dir); err != nil {
			cfg.JobsOff = err.Error()
			return cfg, nil
		}
		cfg.JobsDir, cfg.JobUIDs, cfg.JobLimits = dir, r, limits
	default:
		cfg.JobsOff = "it does not run as root, so it cannot run jobs as users of their own; run it as root, or start it with --allow-unisolated-jobs to run jobs as its own user, able to read its files (see Security model in the README)"
	}
	return cfg, nil
}

// jobLimits reads the limits of each job instance from the flags; a
// disk limit in per cent is of the file system that holds the jobs
// directory dir.
func jobLimits(f serveFlags, dir string) (executor.Limits, error) {
	mem, err := parseSize("--job-memory-limit", f.jobMemory)
	if err != nil {
		return executor.Limits{}, err
	}
	logs, err := parseSize("--job-log-limit", f.jobLog)
	if err != nil {
		return executor.Limits{}, err
	}
	if logs != 0 && logs < executor.MinLogBytes {
		return executor.Limits{}, usageError(fmt.Errorf("--job-log-limit %s is below the least a log keeps, %s", f.jobLog, humanize.IBytes(uint64(executor.MinLogBytes))))
	}
	if f.jobPIDs < 0 {
		return executor.Limits{}, usageError(fmt.Errorf("--job-pids-limit %d: want 0 (no limit) or more", f.jobPIDs))
	}
	tmp, err := humanize.ParseBytes(f.localJobs.tmpSize)
	if err != nil || tmp > 1<<62 {
		return executor.Limits{}, usageError(fmt.Errorf("--job-tmp-size %q: want a size such as 1GiB, or 0 to let jobs share the host's /tmp", f.localJobs.tmpSize))
	}
	disk, err := diskLimit(f.localJobs.diskLimit, dir)
	if err != nil {
		return executor.Limits{}, err
	}
	return executor.Limits{MemoryBytes: mem, PIDs: f.jobPIDs, LogBytes: logs, TmpBytes: int64(tmp), DiskBytes: disk}, nil
}

// localJobFlags are serve's flags of jobs run on this machine, beyond
// the limits of serveFlags.
type localJobFlags struct {
	tmpSize   string
	diskLimit string
}

// addLocalJobFlags defines the flags of jobs run on this machine.
func addLocalJobFlags(fl *pflag.FlagSet, f *localJobFlags) {
	fl.StringVar(&f.tmpSize, "job-tmp-size", "1GiB", "size of the /tmp, /dev/shm and /var/tmp of each job instance run as a user of its own: one tmpfs of its own, counted as its memory (0: jobs share the host's /tmp)")
	fl.StringVar(&f.diskLimit, "job-disk-limit", "10%", "disk space that one job's working directory (its checkpoints included) may take: a size such as 200GiB, or a share of the file system that holds the jobs directory (0: no limit)")
}

// diskLimit reads --job-disk-limit: a size, or a per cent of the size of
// the file system that holds dir (or, while dir does not exist, the
// nearest directory above it that does).
func diskLimit(s, dir string) (int64, error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p <= 0 || p > 100 {
			return 0, usageError(fmt.Errorf("--job-disk-limit %q: want a share of the jobs directory's file system above 0%% and up to 100%%, such as 10%%, or a size such as 200GiB", s))
		}
		size, err := fileSystemSize(dir)
		if err != nil {
			return 0, fmt.Errorf("--job-disk-limit %s: %w", s, err)
		}
		return int64(float64(size) * p / 100), nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n > 1<<62 {
		return 0, usageError(fmt.Errorf("--job-disk-limit %q: want a size such as 200GiB, a share of the jobs directory's file system such as 10%%, or 0 for no limit", s))
	}
	return int64(n), nil
}

// fileSystemSize is the size in bytes of the file system that holds dir,
// or the nearest directory above it that exists.
func fileSystemSize(dir string) (uint64, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, fmt.Errorf("finding the jobs directory %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		err := syscall.Statfs(d, &st)
		if err == nil {
			return st.Blocks * uint64(st.Bsize), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return 0, fmt.Errorf("measuring the file system of the jobs directory %s: %w", abs, err)
		}
	}
}

// parseSize reads a size such as 16GiB, 512MB or 0.
func parseSize(flag, s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > 1<<62 {
		return 0, usageError(fmt.Errorf("%s %q: want a size such as 512MiB or 16GiB, or 0 for no limit", flag, s))
	}
	return int64(n), nil
}

// parseUIDRange reads FIRST-LAST, a range of unprivileged user ids.
func parseUIDRange(s string) (service.UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || first < 1000 || last < first || last > 1<<31-2 {
		return service.UIDRange{}, usageError(fmt.Errorf("--job-uid-range %q: want FIRST-LAST, unused user ids from 1000 up, such as 900000-999999", s))
	}
	return service.UIDRange{First: first, Last: last}, nil
}

// kubeJobFlags are serve's flags of jobs on --backend kubernetes.
type kubeJobFlags struct {
	image      string
	namespace  string
	checkpoint string
}

const defaultKubeCheckpoint = "emptyDir"

// addKubeJobFlags defines the flags of jobs on --backend kubernetes.
func addKubeJobFlags(fl *pflag.FlagSet, f *kubeJobFlags) {
	fl.StringVar(&f.image, "kube-job-image", "", "container image that runs the jobs' commands with --backend kubernetes, each instance a pod of an Indexed Job (default: none, and jobs do not run)")
	fl.StringVar(&f.namespace, "kube-job-namespace", "", "namespace where every team's jobs run with --backend kubernetes (default: each team's own, the namespace labelled "+kubernetes.DefaultTeamLabel+"=<team id>)")
	fl.StringVar(&f.checkpoint, "kube-checkpoint", defaultKubeCheckpoint, "volume of the jobs' CAPBLOCK_CHECKPOINT_DIR with --backend kubernetes: pvc:NAME (a claim of the job's namespace, each job in a subdirectory of its own; ReadWriteMany for jobs of several nodes), hostPath:/DIR (each node's own), or emptyDir (lost when the job runs again); NAME and DIR may hold {team} and {job}")
}

// checkKubeJobs refuses, before anything is opened, flags of jobs on
// Kubernetes that cannot work.
func checkKubeJobs(f serveFlags) error {
	if f.backend != "kubernetes" && f.kubeJobs != (kubeJobFlags{checkpoint: defaultKubeCheckpoint}) {
		return usagef("--kube-job-image, --kube-job-namespace and --kube-checkpoint need --backend kubernetes")
	}
	_, err := kubeWorkloadsConfig(f.kubeJobs)
	return err
}

// kubeJobsConfig checks the flags of jobs on Kubernetes; without an
// image, the server runs no jobs. The local engine's directory, users
// and limits do not apply: a pod is limited to its GPUs, and the node is
// the block's.
func kubeJobsConfig(f kubeJobFlags) (service.Config, error) {
	var cfg service.Config
	if _, err := kubeWorkloadsConfig(f); err != nil {
		return cfg, err
	}
	if f.image == "" {
		cfg.JobsOff = "with --backend kubernetes, jobs run as Indexed Jobs in the container image that --kube-job-image names, and none is given"
	}
	return cfg, nil
}

// kubeWorkloadsConfig is the configuration of jobs on Kubernetes that
// the flags give.
func kubeWorkloadsConfig(f kubeJobFlags) (kubernetes.JobsConfig, error) {
	cp, err := kubernetes.ParseCheckpoint(f.checkpoint)
	if err != nil {
		return kubernetes.JobsConfig{}, usagef("--kube-checkpoint %v", err)
	}
	if errs := validation.IsDNS1123Label(f.namespace); f.namespace != "" && len(errs) > 0 {
		return kubernetes.JobsConfig{}, usagef("--kube-job-namespace %q is not a namespace's name: %s", f.namespace, strings.Join(errs, "; "))
	}
	return kubernetes.JobsConfig{Image: f.image, Namespace: f.namespace, Checkpoint: cp}, nil
}

// engineWorkloads are the workloads of jobs that the engine runs itself:
// with --backend kubernetes and --kube-job-image, Indexed Jobs on the
// cluster; with --backend slurm and --slurm-job-dir, batch jobs in the
// blocks' reservations; else none (the local engine's processes, or no
// jobs).
func engineWorkloads(f serveFlags, engine backend.Backend) (backend.Workloads, error) {
	if be, ok := engine.(*slurm.Backend); ok && f.slurm.jobDir != "" {
		w, err := slurm.NewWorkloads(be, slurm.JobsConfig{Dir: f.slurm.jobDir})
		if err != nil {
			return nil, fmt.Errorf("starting jobs on Slurm: %w", err)
		}
		return w, nil
	}
	be, ok := engine.(*kubernetes.Backend)
	if !ok || f.kubeJobs.image == "" {
		return nil, nil
	}
	cfg, err := kubeWorkloadsConfig(f.kubeJobs)
	if err != nil {
		return nil, err
	}
	w, err := kubernetes.NewWorkloads(be, cfg)
	if err != nil {
		return nil, usageError(err)
	}
	return w, nil
}
