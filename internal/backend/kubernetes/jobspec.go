package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"capblock/internal/backend"
	"capblock/internal/executor"
)

// The labels, annotations and finalizer of the Jobs, Services and pods
// that run capblock's jobs.
const (
	// JobLabel names the capblock job (its id) of a Job, its Service and
	// its pods; the pod informer watches the pods that carry it.
	JobLabel = "capblock.io/job"
	// RunLabel is the run's number, "3" for the job's fourth run.
	RunLabel = "capblock.io/run"
	// RunKeyAnnotation is the run's key exactly as the service names it
	// ("<job id>/<run>"), which labels cannot always hold: an instance's
	// exit is reported with it.
	RunKeyAnnotation = "capblock.io/run-key"
	// ExitFinalizer keeps a pod of capblock's jobs in the cluster until
	// capblock has reported its end, so that an end while no server
	// watched (a pod evicted, deleted, or whose node was lost) is never
	// missed: the next leader finds the pod and reports it.
	ExitFinalizer = "capblock.io/exit"
	// DefaultTeamLabel is the namespace label that names the team whose
	// jobs run there, the same that admission reads.
	DefaultTeamLabel = "capblock.io/team"
	// ContainerName is the name of the container that runs the job's
	// command.
	ContainerName = "train"
	// CheckpointPath is where CAPBLOCK_CHECKPOINT_DIR is mounted.
	CheckpointPath = "/capblock/checkpoint"
	// DefaultMasterPort is the port that rank 0 listens on for its peers.
	DefaultMasterPort = 29500
)

// Defaults of JobsConfig.
const (
	// DefaultJobGrace is the pods' termination grace period: the time
	// between SIGTERM and SIGKILL when the Job controller, an eviction or
	// the block's release deletes one (capblock's own stops give the
	// service's).
	DefaultJobGrace = 30 * time.Second
	// DefaultJobTTL is how long a run's Job, and its pods with their
	// logs, stay after the run ends.
	DefaultJobTTL = 24 * time.Hour
)

const (
	maxJobNameLength = 52 // its pods' hostnames, <name>-<index>, hold 63 at most
	completionIndex  = batchv1.JobCompletionIndexAnnotation
)

// jobName is the name of a run's Job and of its headless Service: the run
// key with '-' for '/' ("job-0a1b…-3") when that is a DNS label short
// enough for the pods' hostnames (<name>-<index>), else one made from the
// key's hash. Services need a DNS-1035 label (a letter first), which
// capblock's job ids, "job-…", are.
func jobName(run string) string {
	name := strings.ReplaceAll(run, "/", "-")
	if len(name) <= maxJobNameLength && len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(run))
	return "cb-" + hex.EncodeToString(sum[:12])
}

// runNumber is the run's number in its key, "<job id>/<run>".
func runNumber(run string) (string, int, error) {
	id, n, ok := strings.Cut(run, "/")
	num, err := strconv.Atoi(n)
	if !ok || err != nil || id == "" {
		return "", 0, fmt.Errorf("run %q is not <job id>/<run>", run)
	}
	return id, num, nil
}

// jobSpec is what a run's Job is made from, besides the workload.
type jobSpec struct {
	namespace     string
	image         string
	checkpoint    Checkpoint
	masterPort    int
	grace         time.Duration
	ttl           time.Duration
	taint         corev1.Taint
	blockLabel    string // the node label key of the workload's block
	podBlockLabel string
}

// runJob is the Indexed Job of w's run: one pod per instance (its rank the
// completion index), all at once, none retried (backoffLimit 0: capblock
// decides restarts, as a new run), each pod on the nodes of the block,
// tolerating the sold taint and requesting the instance's GPUs, and kept
// after it ends (its log with it) until the Job's TTL or the block's
// release.
func runJob(w backend.Workload, s jobSpec) (*batchv1.Job, error) {
	_, run, err := runNumber(w.Run)
	if err != nil {
		return nil, err
	}
	if w.WorldSize < 1 {
		return nil, fmt.Errorf("run %s has world size %d", w.Run, w.WorldSize)
	}
	name := jobName(w.Run)
	labels := map[string]string{JobLabel: labelSafe(w.JobID), RunLabel: strconv.Itoa(run), s.podBlockLabel: labelSafe(w.Block.ID)}
	annotations := map[string]string{RunKeyAnnotation: w.Run}
	n := int32(w.WorldSize)
	none := int32(0)
	indexed := batchv1.IndexedCompletion
	ttl := int32(s.ttl / time.Second)
	grace := int64(s.grace / time.Second)
	no := false
	volume, mount := checkpointVolume(s.checkpoint, w)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Completions: &n, Parallelism: &n, CompletionMode: &indexed, BackoffLimit: &none,
			TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: maps.Clone(annotations),
					Finalizers: []string{ExitFinalizer}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					Subdomain:                     name,
					TerminationGracePeriodSeconds: &grace,
					AutomountServiceAccountToken:  &no, // a job has no business with the API
					EnableServiceLinks:            &no,
					Tolerations:                   []corev1.Toleration{{Key: s.taint.Key, Operator: corev1.TolerationOpExists, Effect: s.taint.Effect}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
							MatchExpressions: []corev1.NodeSelectorRequirement{{Key: s.blockLabel, Operator: corev1.NodeSelectorOpExists}},
						}}},
					}},
					Containers: []corev1.Container{{
						Name: ContainerName, Image: s.image, Command: w.Command,
						Env:          podEnv(w, name, s.masterPort),
						Resources:    corev1.ResourceRequirements{Limits: podLimits(w)},
						VolumeMounts: []corev1.VolumeMount{mount},
					}},
					Volumes: []corev1.Volume{volume},
				},
			},
		},
	}, nil
}

// runService is the headless Service that gives each pod of job a DNS
// name, <job>-<index>.<service>, ready or not (rank 0 must be found while
// the others start). It belongs to the Job: it goes when the Job goes.
func runService(job *batchv1.Job) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: job.Namespace, Labels: maps.Clone(job.Labels),
			OwnerReferences: []metav1.OwnerReference{owner(job)}},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{JobLabel: job.Labels[JobLabel], RunLabel: job.Labels[RunLabel]},
			PublishNotReadyAddresses: true,
		},
	}
}

// owner makes job the owner of what refers to it, without blocking its
// deletion (blockOwnerDeletion would need the right to update the Job's
// finalizers where OwnerReferencesPermissionEnforcement is on).
func owner(job *batchv1.Job) metav1.OwnerReference {
	yes := true
	gvk := batchv1.SchemeGroupVersion.WithKind("Job")
	return metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: job.Name, UID: job.UID, Controller: &yes}
}

// podEnv is the environment contract of the README, as the local engine
// sets it, with the Kubernetes engine's values: RANK is the pod's
// completion index, MASTER_ADDR rank 0's name through the headless
// Service, the checkpoint directory the mounted volume, and
// CUDA_VISIBLE_DEVICES is left to the device plugin (capblock's
// variables win over the user's, so a user's value is dropped too).
// Sorted by name, so that the Job is the same for every rank's start.
func podEnv(w backend.Workload, name string, port int) []corev1.EnvVar {
	env := executor.JobEnv(executor.EnvParams{
		BlockID: w.Block.ID, PlanID: w.PlanID, SegmentEnd: w.Block.End, CheckpointDir: CheckpointPath,
		RestartCount: w.Restarts, WorldSize: w.WorldSize, MasterAddr: name + "-0." + name, MasterPort: port, User: w.Env,
	})
	delete(env, "RANK")
	delete(env, "CUDA_VISIBLE_DEVICES")
	out := make([]corev1.EnvVar, 0, len(env)+1)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, corev1.EnvVar{Name: k, Value: env[k]})
	}
	index := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + completionIndex + "']"}}
	return append(out, corev1.EnvVar{Name: "RANK", ValueFrom: index})
}

// podLimits are an instance's GPUs, and its memory when limited (an
// extended resource's and memory's requests default to their limits).
func podLimits(w backend.Workload) corev1.ResourceList {
	out := corev1.ResourceList{}
	if w.GPUsPerInstance > 0 {
		out[GPUResource] = *resource.NewQuantity(int64(w.GPUsPerInstance), resource.DecimalSI)
	}
	if w.Limits.MemoryBytes > 0 {
		out[corev1.ResourceMemory] = *resource.NewQuantity(w.Limits.MemoryBytes, resource.BinarySI)
	}
	return out
}
