package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestKWOKStages: the files KWOK runs with are the built-in stages, less
// those an option replaces, then the options' own.
func TestKWOKStages(t *testing.T) {
	bin := t.TempDir()
	if err := os.Mkdir(filepath.Join(bin, "kwok-stages"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-initialize.yaml", "pod-complete.yaml", "pod-ready.yaml"} {
		if err := os.WriteFile(filepath.Join(bin, "kwok-stages", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	builtin := func(name string) string { return filepath.Join(bin, "kwok-stages", name) }
	tests := map[string]struct {
		opts Options
		want []string // the cluster's own files by base name
	}{
		"the built-in stages": {
			want: []string{builtin("node-initialize.yaml"), builtin("pod-complete.yaml"), builtin("pod-ready.yaml")},
		},
		"pods run until ended": {
			opts: Options{PodsRunUntilEnded: true},
			want: []string{builtin("node-initialize.yaml"), builtin("pod-ready.yaml"), "pod-exit.yaml"},
		},
		"a stage of the test's, added": {
			opts: Options{Stages: []string{"/t/logs.yaml"}},
			want: []string{builtin("node-initialize.yaml"), builtin("pod-complete.yaml"), builtin("pod-ready.yaml"), "/t/logs.yaml"},
		},
		"a stage of the test's, replacing one of the same name": {
			opts: Options{Stages: []string{"/t/pod-ready.yaml"}, PodsRunUntilEnded: true},
			want: []string{builtin("node-initialize.yaml"), "/t/pod-ready.yaml", "pod-exit.yaml"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Cluster{dir: t.TempDir()}
			got, err := c.kwokStages(bin, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range got {
				if filepath.Dir(f) == c.dir {
					got[i] = filepath.Base(f)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("KWOK's files (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPodsRunUntilEnded: a Job's pod runs until EndPod, and then fails
// with the code it was given.
func TestPodsRunUntilEnded(t *testing.T) {
	c := Start(t, Options{PodsRunUntilEnded: true})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := c.AddGPUNodes(ctx, 1, 8, "zone-a", nil); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(c.AdminConfig())
	zero := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec:       batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{Spec: *gpuPod("train", 8, "zone-a").Spec.DeepCopy()}},
	}
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := admin.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	phase := func(want corev1.PodPhase) func() (bool, error) {
		return func() (bool, error) {
			list, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
			if err != nil || len(list.Items) != 1 {
				return false, err
			}
			pod = list.Items[0]
			return pod.Status.Phase == want, nil
		}
	}
	if err := c.poll(ctx, "waiting for the Job's pod to run", phase(corev1.PodRunning)); err != nil {
		t.Fatal(err)
	}
	// KWOK's own stage would have ended it by now: it acts within
	// milliseconds of the pod running.
	hold, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	if err := c.poll(hold, "", phase(corev1.PodSucceeded)); err == nil {
		t.Fatal("the Job's pod ended before it was told to")
	}
	if err := c.EndPod(ctx, "default", pod.Name, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.poll(ctx, "waiting for the pod to fail", phase(corev1.PodFailed)); err != nil {
		t.Fatal(err)
	}
	if code := pod.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
		t.Errorf("the container's exit code is %d, want 3", code)
	}
}
