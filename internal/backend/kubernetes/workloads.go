package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"capblock/internal/backend"
)

// JobsConfig is how capblock's jobs run on the cluster (Workloads).
type JobsConfig struct {
	// Image is the container image that runs every job's command.
	// Required.
	Image string
	// Namespace, when set, is where every team's jobs run. Empty: each
	// team's run in the namespace labelled TeamLabel=<team id> (the
	// first by name, if several are).
	Namespace string
	// TeamLabel is the namespace label that names a namespace's team.
	// Default DefaultTeamLabel.
	TeamLabel string
	// Checkpoint is the volume mounted at CheckpointPath, the jobs'
	// CAPBLOCK_CHECKPOINT_DIR. The zero value is an emptyDir, which a
	// restart does not find again.
	Checkpoint Checkpoint
	// MasterPort is rank 0's rendezvous port. Default DefaultMasterPort.
	MasterPort int
	// Grace is the pods' termination grace period. Default
	// DefaultJobGrace.
	Grace time.Duration
	// TTL is how long a run's Job and pods (and so their logs) stay
	// after the run ends. Default DefaultJobTTL.
	TTL time.Duration
}

// Checkpoint is the volume that holds a job's checkpoints. Its names may
// hold {team} and {job}, replaced by the team's and the job's ids. At
// most one of its fields is set.
type Checkpoint struct {
	// Claim names a PersistentVolumeClaim of the job's namespace,
	// mounted at the job's own subdirectory (its id): one claim may
	// serve a whole team ("checkpoints-{team}"). Every instance of a run
	// mounts it, on whichever node it runs: it must be ReadWriteMany for
	// jobs of more than one node.
	Claim string
	// HostPath is a directory of the node ("/var/lib/capblock/{job}"),
	// made if missing. Each node has its own: a run on other nodes does
	// not find it.
	HostPath string
}

// ParseCheckpoint reads --kube-checkpoint: "pvc:NAME", "hostPath:DIR", or
// "emptyDir".
func ParseCheckpoint(s string) (Checkpoint, error) {
	kind, arg, _ := strings.Cut(s, ":")
	var c Checkpoint
	switch {
	case s == "" || s == "emptyDir":
		return c, nil
	case strings.EqualFold(kind, "pvc") && arg != "":
		c.Claim = arg
	case strings.EqualFold(kind, "hostPath") && strings.HasPrefix(arg, "/"):
		c.HostPath = arg
	default:
		return c, fmt.Errorf("%q: want pvc:NAME, hostPath:/DIR or emptyDir (NAME and DIR may hold {team} and {job})", s)
	}
	return c, c.check()
}

// check refuses a claim that no team and job could make a valid name of.
func (c Checkpoint) check() error {
	if c.Claim != "" && c.HostPath != "" {
		return errors.New("a checkpoint volume is a claim or a host path, not both")
	}
	if c.Claim != "" {
		name := expand(c.Claim, "team", "job")
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("claim %q: %s", c.Claim, strings.Join(errs, "; "))
		}
	}
	return nil
}

// expand replaces {team} and {job} in s.
func expand(s, team, job string) string {
	return strings.NewReplacer("{team}", team, "{job}", job).Replace(s)
}

// checkpointVolume is the volume of w's checkpoints and its mount.
func checkpointVolume(c Checkpoint, w backend.Workload) (corev1.Volume, corev1.VolumeMount) {
	vol := corev1.Volume{Name: "checkpoint"}
	mount := corev1.VolumeMount{Name: "checkpoint", MountPath: CheckpointPath}
	team, job := labelSafe(w.Team), labelSafe(w.JobID)
	switch {
	case c.Claim != "":
		vol.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: expand(c.Claim, team, job)}
		mount.SubPath = job
	case c.HostPath != "":
		kind := corev1.HostPathDirectoryOrCreate
		vol.HostPath = &corev1.HostPathVolumeSource{Path: expand(c.HostPath, team, job), Type: &kind}
	default:
		vol.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	return vol, mount
}

// withDefaults fills in what cfg leaves out and checks the rest.
func (cfg JobsConfig) withDefaults() (JobsConfig, error) {
	if cfg.Image == "" {
		return cfg, errors.New("jobs on Kubernetes need an image to run their commands in")
	}
	cfg.TeamLabel = cmp.Or(cfg.TeamLabel, DefaultTeamLabel)
	if cfg.MasterPort == 0 {
		cfg.MasterPort = DefaultMasterPort
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultJobGrace
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultJobTTL
	}
	var errs []error
	for _, why := range validation.IsQualifiedName(cfg.TeamLabel) {
		errs = append(errs, fmt.Errorf("team label %q: %s", cfg.TeamLabel, why))
	}
	if cfg.Namespace != "" {
		for _, why := range validation.IsDNS1123Label(cfg.Namespace) {
			errs = append(errs, fmt.Errorf("namespace %q: %s", cfg.Namespace, why))
		}
	}
	if cfg.MasterPort < 1 || cfg.MasterPort > 65535 {
		errs = append(errs, fmt.Errorf("master port %d: want 1 to 65535", cfg.MasterPort))
	}
	if err := cfg.Checkpoint.check(); err != nil {
		errs = append(errs, fmt.Errorf("checkpoint volume: %w", err))
	}
	return cfg, errors.Join(errs...)
}

// Workloads runs capblock's jobs on the cluster: each run of a job is an
// Indexed Job of one pod per instance (instances.go), in the team's
// namespace, on the nodes of its block. It is backend.Workloads.
type Workloads struct {
	be  *Backend
	cfg JobsConfig
	log *slog.Logger
}

var _ backend.Workloads = (*Workloads)(nil)

// NewWorkloads runs jobs through be's client and labels. Without a
// checkpoint volume it warns: an emptyDir dies with its pod.
func NewWorkloads(be *Backend, cfg JobsConfig) (*Workloads, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("configuring jobs on Kubernetes: %w", err)
	}
	if cfg.Checkpoint == (Checkpoint{}) {
		be.log.Warn("jobs on Kubernetes keep their checkpoints in an emptyDir, which a restart does not find again; give a checkpoint volume (--kube-checkpoint)")
	}
	return &Workloads{be: be, cfg: cfg, log: be.log}, nil
}

// Open starts watching the pods of capblock's jobs (instances.go).
func (wl *Workloads) Open() (backend.Instances, error) {
	return openInstances(wl)
}

// spec is what a run's Job is made from in namespace.
func (wl *Workloads) spec(w backend.Workload, namespace string) jobSpec {
	return jobSpec{namespace: namespace, image: wl.cfg.Image, checkpoint: wl.cfg.Checkpoint, masterPort: wl.cfg.MasterPort,
		grace: wl.cfg.Grace, ttl: wl.cfg.TTL, taint: wl.be.cfg.Taint, blockLabel: wl.be.blockLabel(w.Block.ID),
		podBlockLabel: wl.be.cfg.PodBlockLabel}
}

// namespace is where team's jobs run: the configured namespace, else the
// first by name of those labelled with the team.
func (wl *Workloads) namespace(ctx context.Context, team string) (string, error) {
	if wl.cfg.Namespace != "" {
		return wl.cfg.Namespace, nil
	}
	sel := wl.cfg.TeamLabel + "=" + labelSafe(team)
	list, err := wl.be.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return "", fmt.Errorf("finding the namespace of team %s: %w", team, err)
	}
	var names []string
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			names = append(names, ns.Name)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("team %s has no namespace for its jobs: label one %s", team, sel)
	}
	slices.Sort(names)
	return names[0], nil
}

// JobsPolicyRules are what Workloads does on the cluster, beyond what
// the backend's blocks need: it makes and removes the runs' Jobs, makes
// their headless Services, watches the jobs' pods and removes
// ExitFinalizer from them, reads their logs, and finds the teams'
// namespaces.
func JobsPolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}},
	}
}
