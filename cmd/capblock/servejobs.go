package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

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
// --allow-unisolated-jobs.
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
	limits, err := jobLimits(f)
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
		cfg.JobsDir, cfg.JobLimits = dir, limits
	case os.Geteuid() == 0 && isolation.CgroupVersion == 0:
		cfg.JobsOff = fmt.Sprintf("it cannot put jobs in cgroups of their own on this machine (%s); start it with --allow-unisolated-jobs to run jobs as its own user, uncontained (see Security model in the README)", isolation.Reason)
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

// jobLimits reads the limits of each job instance from the flags.
func jobLimits(f serveFlags) (executor.Limits, error) {
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
	return executor.Limits{MemoryBytes: mem, PIDs: f.jobPIDs, LogBytes: logs}, nil
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
