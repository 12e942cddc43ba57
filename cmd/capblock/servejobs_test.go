package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/backend/local"
)

// TestServeBadKubeJobFlags: a bad flag of jobs on Kubernetes is one line
// saying what is wrong, exit status 2, before anything is opened.
func TestServeBadKubeJobFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"an image on the sim":      {[]string{"--kube-job-image", "trainer:1"}, "--kube-job-image, --kube-job-namespace and --kube-checkpoint need --backend kubernetes"},
		"a checkpoint on the sim":  {[]string{"--kube-checkpoint", "pvc:ckpt"}, "need --backend kubernetes"},
		"an unknown volume":        {[]string{"--backend", "kubernetes", "--kube-checkpoint", "nfs:server:/x"}, `--kube-checkpoint "nfs:server:/x": want pvc:NAME`},
		"a claim no name fits":     {[]string{"--backend", "kubernetes", "--kube-checkpoint", "pvc:Ckpt_{team}"}, `--kube-checkpoint claim "Ckpt_{team}"`},
		"a namespace no name fits": {[]string{"--backend", "kubernetes", "--kube-job-namespace", "Jobs"}, `--kube-job-namespace "Jobs" is not a namespace's name`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := t.TempDir() + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Errorf("serve %v created %s before refusing its flags", tc.args, db)
			}
		})
	}
}

// TestKubeJobsConfig: with --backend kubernetes, jobs run on the cluster
// when an image is given, and not at all (with the reason) without one;
// the flags reach the jobs' configuration; the sim backend runs no
// workloads of its own.
func TestKubeJobsConfig(t *testing.T) {
	off, err := jobsConfig(serveFlags{backend: "kubernetes", kubeJobs: kubeJobFlags{checkpoint: defaultKubeCheckpoint}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(off.JobsOff, "--kube-job-image") || off.JobsDir != "" {
		t.Errorf("jobs on Kubernetes without an image: JobsOff %q, JobsDir %q; want off, naming --kube-job-image, and no jobs directory", off.JobsOff, off.JobsDir)
	}
	on, err := jobsConfig(serveFlags{backend: "kubernetes", kubeJobs: kubeJobFlags{image: "trainer:1", checkpoint: defaultKubeCheckpoint}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if on.JobsOff != "" || on.JobsDir != "" || on.JobLimits != (backend.Limits{}) {
		t.Errorf("jobs on Kubernetes with an image: JobsOff %q, JobsDir %q, limits %+v; want them on, without the local engine's directory and limits", on.JobsOff, on.JobsDir, on.JobLimits)
	}
	got, err := kubeWorkloadsConfig(kubeJobFlags{image: "trainer:1", namespace: "ml-jobs", checkpoint: "pvc:checkpoints-{team}"})
	if err != nil {
		t.Fatal(err)
	}
	want := kubernetes.JobsConfig{Image: "trainer:1", Namespace: "ml-jobs", Checkpoint: kubernetes.Checkpoint{Claim: "checkpoints-{team}"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs' configuration (-want +got):\n%s", diff)
	}
	w, err := engineWorkloads(serveFlags{backend: "sim", kubeJobs: kubeJobFlags{image: "trainer:1"}}, local.NewSim(nil, nil))
	if err != nil || w != nil {
		t.Errorf("the sim backend's workloads: %v, %v; want none, so that jobs run in the jobs directory", w, err)
	}
}

// TestSlurmRunsNoJobsHere: with --backend slurm the server runs no jobs
// on its own machine: without --slurm-job-dir none at all, saying how to
// run them instead; with it, through the engine's workloads, without the
// local engine's directory.
func TestSlurmRunsNoJobsHere(t *testing.T) {
	cfg, err := jobsConfig(serveFlags{backend: "slurm"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cfg.JobsOff, "--slurm-job-dir") || !strings.Contains(cfg.JobsOff, "sbatch --reservation") || cfg.JobsDir != "" {
		t.Errorf("jobs with --backend slurm: JobsOff %q, JobsDir %q; want off, naming --slurm-job-dir and sbatch, and no jobs directory", cfg.JobsOff, cfg.JobsDir)
	}
	cfg, err = jobsConfig(serveFlags{backend: "slurm", slurm: slurmFlags{jobDir: t.TempDir()}}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JobsOff != "" || cfg.JobsDir != "" {
		t.Errorf("jobs with --backend slurm --slurm-job-dir: JobsOff %q, JobsDir %q; want on, without the local jobs directory", cfg.JobsOff, cfg.JobsDir)
	}
}

// TestServeBadLocalJobFlags: a bad size of the jobs' /tmp or disk is one
// line saying what is wrong and what is wanted, exit status 2.
func TestServeBadLocalJobFlags(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"a tmp size that is no size": {[]string{"--job-tmp-size", "lots"}, `--job-tmp-size "lots": want a size such as 1GiB, or 0 to let jobs share the host's /tmp`},
		"a disk limit of no size":    {[]string{"--job-disk-limit", "lots"}, `--job-disk-limit "lots": want a size such as 200GiB`},
		"a share of nothing":         {[]string{"--job-disk-limit", "0%"}, `--job-disk-limit "0%": want a share of the jobs directory's file system above 0% and up to 100%`},
		"a share beyond the whole":   {[]string{"--job-disk-limit", "150%"}, `above 0% and up to 100%`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := t.TempDir() + "/capblock.db"
			got := runApp(t.Context(), nil, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if got.code != 2 || !strings.Contains(got.stderr, tc.want) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("serve %v: exit %d, stderr %q; want 2 and one line with %q", tc.args, got.code, got.stderr, tc.want)
			}
		})
	}
}

// TestJobDiskLimit: --job-disk-limit is a size, or a share of the size of
// the file system that holds the jobs directory, which need not exist
// yet.
func TestJobDiskLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet", "capblock-jobs")
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(filepath.Dir(dir)), &st); err != nil {
		t.Fatal(err)
	}
	whole := int64(st.Blocks) * st.Bsize
	for in, want := range map[string]int64{"0": 0, "200GiB": 200 << 30, "10%": whole / 10, "100%": whole} {
		got, err := diskLimit(in, dir)
		if err != nil || got < want-1 || got > want+1 {
			t.Errorf("diskLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
