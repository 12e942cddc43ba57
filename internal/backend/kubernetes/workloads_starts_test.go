package kubernetes_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/kubetest"
)

// TestEndBeforeStart: the first Start of a run makes every rank's pod;
// the end of a rank whose Start is not applied yet waits for it, so that
// the service never counts the end of an instance it has not counted as
// started; and a rank stopped before its Start has its end dropped, its
// pod let go.
func TestEndBeforeStart(t *testing.T) {
	c := startJobsCluster(t)
	ctx := t.Context()
	nodes := c.addJobNodes(t, 2)
	c.teamNamespace(t, jobsNamespace, jobsTeam)
	be := c.newBackend(t, kubernetes.Config{})
	wl, err := kubernetes.NewWorkloads(be, kubernetes.JobsConfig{Image: "trainer:1"})
	if err != nil {
		t.Fatal(err)
	}
	blk := block("cb-early", jobsTeam, nodes...)
	if err := be.Activate(ctx, blk); err != nil {
		t.Fatal(err)
	}
	ins := open(t, wl)
	t.Cleanup(func() { ins.Close() })
	pair := func(run string, rank int) backend.Workload {
		w := workload(run, rank, blk)
		w.WorldSize = 2
		return w
	}
	ended := func(p corev1.Pod, phase corev1.PodPhase) {
		t.Helper()
		kubetest.Eventually(t, "pod "+p.Name+" has ended", func() (bool, error) {
			got, err := c.admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && got.Status.Phase == phase, err
		})
	}

	// 1. Rank 1 ends before its Start. Rank 0's end, which comes after,
	// is reported first: rank 1's waits, and comes with its Start.
	run := "job-e/1"
	if err := ins.Start(ctx, pair(run, 0)); err != nil {
		t.Fatal(err)
	}
	pods := c.runningPods(t, run, 2)
	c.endPod(t, pods[1], 0)
	ended(pods[1], corev1.PodSucceeded)
	c.endPod(t, pods[0], 0)
	if got := receiveExits(t, ins, 1); got[0].Instance != 0 {
		t.Fatalf("the first end reported: %+v, want rank 0's; rank 1's waits for its Start", got[0])
	}
	if err := ins.Start(ctx, pair(run, 1)); err != nil {
		t.Fatal(err)
	}
	if got := receiveExits(t, ins, 1); got[0].Instance != 1 || got[0].Code != 0 {
		t.Errorf("the end reported after rank 1's Start: %+v, want rank 1's, code 0", got[0])
	}

	// 2. Rank 1 fails before its Start, and the run is stopped: the
	// Start is never applied. Its end is dropped (reported, nobody
	// would read it, and its finalizer would stay), its pod let go.
	run2 := "job-e/2"
	if err := ins.Start(ctx, pair(run2, 0)); err != nil {
		t.Fatal(err)
	}
	pods = c.runningPods(t, run2, 2)
	c.endPod(t, pods[1], 1)
	ended(pods[1], corev1.PodFailed)
	if err := ins.Stop(run2, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, "rank 1's pod is let go", func() (bool, error) {
		got, err := c.admin.CoreV1().Pods(pods[1].Namespace).Get(ctx, pods[1].Name, metav1.GetOptions{})
		return err == nil && !slices.Contains(got.Finalizers, kubernetes.ExitFinalizer), err
	})
	if err := ins.Stop(run2, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := receiveExits(t, ins, 1); got[0].Instance != 0 || got[0].Code != kubernetes.ExitKilled {
		t.Errorf("the end reported after the stop: %+v, want rank 0's, killed", got[0])
	}
}
