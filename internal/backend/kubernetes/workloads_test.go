package kubernetes_test

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
	"capblock/internal/kubetest"
)

const (
	jobsTeam      = "team-a"
	jobsNamespace = "team-a-jobs"
)

// TestWorkloads runs capblock's jobs on a cluster as capblock's
// ServiceAccount, its steps in order: a run of four instances on a block
// of four of six nodes, its pods adopted by a new Open, their logs read,
// their ends reported; then a run stopped, and an end that no server
// watched.
func TestWorkloads(t *testing.T) {
	c := startJobsCluster(t)
	ctx := t.Context()
	nodes := c.addJobNodes(t, 6)
	c.teamNamespace(t, jobsNamespace, jobsTeam)
	be := c.newBackend(t, kubernetes.Config{})
	wl, err := kubernetes.NewWorkloads(be, kubernetes.JobsConfig{Image: "trainer:1",
		Checkpoint: kubernetes.Checkpoint{HostPath: "/var/lib/capblock/{team}/{job}"}})
	if err != nil {
		t.Fatal(err)
	}
	blk := block("cb-jobs", jobsTeam, nodes[1:5]...)
	if err := be.Activate(ctx, blk); err != nil {
		t.Fatal(err)
	}
	// ins is the open Instances, opened again by some steps: the last is
	// closed when the test ends.
	ins := open(t, wl)
	t.Cleanup(func() { ins.Close() })
	run := "job-1/0"

	t.Run("a run is one Indexed Job of a pod per rank, on the block's nodes", func(t *testing.T) {
		for rank := range 4 {
			if err := ins.Start(ctx, workload(run, rank, blk)); err != nil {
				t.Fatal(err)
			}
		}
		pods := c.runningPods(t, run, 4)
		var on []string
		for i, p := range pods {
			on = append(on, p.Spec.NodeName)
			if got := p.Annotations[batchv1.JobCompletionIndexAnnotation]; got != strconv.Itoa(i) {
				t.Errorf("pod %s has completion index %s, want %d", p.Name, got, i)
			}
		}
		sort.Strings(on)
		if diff := cmp.Diff(nodes[1:5], on); diff != "" {
			t.Errorf("the pods' nodes (-block +pods):\n%s", diff)
		}
		jobs := c.jobs(t)
		if len(jobs) != 1 {
			t.Fatalf("%d Jobs, want 1: %v", len(jobs), jobs)
		}
		j := jobs[0]
		if *j.Spec.Completions != 4 || *j.Spec.Parallelism != 4 || *j.Spec.CompletionMode != batchv1.IndexedCompletion || *j.Spec.BackoffLimit != 0 {
			t.Errorf("Job %s: completions %d, parallelism %d, mode %s, backoffLimit %d; want 4, 4, Indexed, 0",
				j.Name, *j.Spec.Completions, *j.Spec.Parallelism, *j.Spec.CompletionMode, *j.Spec.BackoffLimit)
		}
		env := envOf(pods[2])
		want := map[string]string{"RANK": "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
			"WORLD_SIZE": "4", "MASTER_ADDR": "job-1-0-0.job-1-0", "MASTER_PORT": "29500", "CAPBLOCK_BLOCK_ID": "cb-jobs",
			"CAPBLOCK_CHECKPOINT_DIR": kubernetes.CheckpointPath, "CAPBLOCK_RESTART_COUNT": "0", "NCCL_DEBUG": "INFO"}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("pod %s: %s=%q, want %q", pods[2].Name, k, env[k], v)
			}
		}
		if _, ok := env["CUDA_VISIBLE_DEVICES"]; ok {
			t.Errorf("pod %s sets CUDA_VISIBLE_DEVICES; the device plugin does", pods[2].Name)
		}
		svc, err := c.admin.CoreV1().Services(jobsNamespace).Get(ctx, "job-1-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || pods[0].Spec.Subdomain != svc.Name || pods[0].Spec.Hostname != "job-1-0-0" {
			t.Errorf("rank 0 is %s.%s behind Service %s (clusterIP %q); want job-1-0-0.job-1-0, headless",
				pods[0].Spec.Hostname, pods[0].Spec.Subdomain, svc.Name, svc.Spec.ClusterIP)
		}
		gpus := pods[0].Spec.Containers[0].Resources.Limits[kubernetes.GPUResource]
		if gpus.Value() != 8 {
			t.Errorf("a pod's GPU limit is %v, want 8", gpus.String())
		}
		if hp := pods[0].Spec.Volumes[0].HostPath; hp == nil || hp.Path != "/var/lib/capblock/team-a/job-1" {
			t.Errorf("the checkpoint volume is %+v, want the host path /var/lib/capblock/team-a/job-1", pods[0].Spec.Volumes[0])
		}
	})

	t.Run("starting again is a no-op", func(t *testing.T) {
		before := c.jobs(t)
		for rank := range 4 {
			if err := ins.Start(ctx, workload(run, rank, blk)); err != nil {
				t.Fatal(err)
			}
		}
		// A new Open knows nothing of the run but its pods.
		again := open(t, wl)
		defer again.Close()
		if err := again.Start(ctx, workload(run, 3, blk)); err != nil {
			t.Fatal(err)
		}
		after := c.jobs(t)
		if len(after) != 1 || after[0].UID != before[0].UID {
			t.Errorf("Jobs after starting again: %d, first %s; want the one Job %s", len(after), after[0].UID, before[0].UID)
		}
		c.runningPods(t, run, 4)
	})

	t.Run("a new Open adopts the running pods", func(t *testing.T) {
		if err := ins.Close(); err != nil {
			t.Fatal(err)
		}
		ins = open(t, wl)
		got, err := ins.Adopt()
		if err != nil {
			t.Fatal(err)
		}
		want := []backend.RunningInstance{{Run: run, Instance: 0}, {Run: run, Instance: 1}, {Run: run, Instance: 2}, {Run: run, Instance: 3}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("adopted (-want +got):\n%s", diff)
		}
	})

	t.Run("logs are read through the API server", func(t *testing.T) {
		n := int64(len(jobLogText))
		tests := map[string]struct {
			offset   int64
			limit    int
			want     string
			wantNext int64
		}{
			"from the start":                  {0, 0, jobLogText, n},
			"a limit":                         {0, 8, "rank up\n", 8},
			"from an offset":                  {8, 4, "step", 12},
			"from the end":                    {-5, 0, "done\n", n},
			"from the end, limited":           {-5, 2, "do", n - 3},
			"before the start, from the end":  {-1000, 4, "rank", 4},
			"after the end: nothing new, yet": {n, 10, "", n},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				got, next, err := wl.ReadLog(ctx, "job-1", 1, tc.offset, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tc.want || next != tc.wantNext {
					t.Errorf("ReadLog(%d, %d) = %q, %d; want %q, %d", tc.offset, tc.limit, got, next, tc.want, tc.wantNext)
				}
			})
		}
		got, next, err := wl.ReadLog(ctx, "job-unknown", 0, 0, 0)
		if err != nil || len(got) != 0 || next != 0 {
			t.Errorf("the log of a job with no pod: %q, %d, %v; want empty at 0", got, next, err)
		}
	})

	t.Run("each pod's end is reported once, with its code", func(t *testing.T) {
		pods := c.runningPods(t, run, 4)
		for _, p := range pods {
			c.endPod(t, p, 0)
		}
		got := receiveExits(t, ins, 4)
		want := []backend.InstanceExit{{JobID: run, Instance: 0}, {JobID: run, Instance: 1}, {JobID: run, Instance: 2}, {JobID: run, Instance: 3}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("exits (-want +got):\n%s", diff)
		}
		kubetest.Eventually(t, "the finalizers are removed, the pods kept for their logs", func() (bool, error) {
			kept := c.podsOf(t, run)
			return len(kept) == 4 && !slices.ContainsFunc(kept, hasExitFinalizer), nil
		})
	})

	run2 := "job-1/1"
	t.Run("a stopped run's pods end as killed, once; a failure keeps its code", func(t *testing.T) {
		w := workload(run2, 0, blk)
		w.Restarts = 1
		for rank := range 4 {
			w.Rank = rank
			if err := ins.Start(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		pods := c.runningPods(t, run2, 4)
		if env := envOf(pods[0]); env["CAPBLOCK_RESTART_COUNT"] != "1" || env["MASTER_ADDR"] != "job-1-1-0.job-1-1" {
			t.Errorf("the second run's environment: %v", env)
		}
		c.endPod(t, pods[3], 3)
		if got := receiveExits(t, ins, 1); got[0].Instance != 3 || got[0].Code != 3 {
			t.Errorf("the failed pod's exit: %+v, want instance 3, code 3", got[0])
		}
		for rank := range 4 {
			if err := ins.Stop(run2, rank, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		got := receiveExits(t, ins, 3)
		for i, x := range got {
			if x.JobID != run2 || x.Instance != i || x.Code != kubernetes.ExitKilled {
				t.Errorf("exit %d: %+v, want run %s instance %d, code %d", i, x, run2, i, kubernetes.ExitKilled)
			}
		}
		kubetest.Eventually(t, "the stopped pods are gone, the failed one kept", func() (bool, error) {
			kept := c.podsOf(t, run2)
			return len(kept) == 1 && kept[0].Name == pods[3].Name, nil
		})
		if err := ins.Stop(run2, 3, time.Second); err != nil {
			t.Errorf("stopping an ended instance: %v", err)
		}
	})

	t.Run("an end while no server watched is reported by the next", func(t *testing.T) {
		run3 := "job-1/2"
		for rank := range 4 {
			if err := ins.Start(ctx, workload(run3, rank, blk)); err != nil {
				t.Fatal(err)
			}
		}
		pods := c.runningPods(t, run3, 4)
		if err := ins.Close(); err != nil {
			t.Fatal(err)
		}
		c.endPod(t, pods[1], 0)
		if err := c.admin.CoreV1().Pods(jobsNamespace).Delete(ctx, pods[2].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "pod 1 has ended", func() (bool, error) {
			p, err := c.admin.CoreV1().Pods(jobsNamespace).Get(ctx, pods[1].Name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodSucceeded, err
		})
		ins = open(t, wl)
		adopted, err := ins.Adopt()
		if err != nil {
			t.Fatal(err)
		}
		want := []backend.RunningInstance{{Run: run3, Instance: 0}, {Run: run3, Instance: 3}}
		if diff := cmp.Diff(want, adopted); diff != "" {
			t.Errorf("adopted (-want +got):\n%s", diff)
		}
		got := receiveExits(t, ins, 2)
		codes := map[int]int{}
		for _, x := range got {
			codes[x.Instance] = x.Code
		}
		if diff := cmp.Diff(map[int]int{1: 0, 2: kubernetes.ExitKilled}, codes); diff != "" {
			t.Errorf("exits by instance (-want +got):\n%s", diff)
		}
	})
}

// teamNamespace makes namespace, labelled as team's.
func (c *jobsCluster) teamNamespace(t *testing.T, name, team string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kubernetes.DefaultTeamLabel: team}}}
	if _, err := c.admin.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// open opens wl; the caller closes it.
func open(t *testing.T, wl *kubernetes.Workloads) backend.Instances {
	t.Helper()
	ins, err := wl.Open()
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// workload is rank of a four-instance run of a job of jobsTeam on blk.
func workload(run string, rank int, blk core.Block) backend.Workload {
	id, _, _ := strings.Cut(run, "/")
	return backend.Workload{JobID: id, Run: run, Rank: rank, WorldSize: 4, Block: blk, GPUsPerInstance: 8, Team: jobsTeam,
		Command: []string{"python", "train.py"}, Env: map[string]string{"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0"}}
}

// podsOf returns the run's pods, by completion index.
func (c *jobsCluster) podsOf(t *testing.T, run string) []corev1.Pod {
	t.Helper()
	list, err := c.admin.CoreV1().Pods(jobsNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: kubernetes.JobLabel})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Annotations[kubernetes.RunKeyAnnotation] == run {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Annotations[batchv1.JobCompletionIndexAnnotation] < out[j].Annotations[batchv1.JobCompletionIndexAnnotation]
	})
	return out
}

// runningPods waits until the run has n pods, all Running, and returns
// them by completion index.
func (c *jobsCluster) runningPods(t *testing.T, run string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	kubetest.Eventually(t, "the pods of "+run+" run", func() (bool, error) {
		pods = c.podsOf(t, run)
		return len(pods) == n && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning }), nil
	})
	return pods
}

func (c *jobsCluster) jobs(t *testing.T) []batchv1.Job {
	t.Helper()
	list, err := c.admin.BatchV1().Jobs(jobsNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// receiveExits waits for n exits, sorted by run and instance, with their
// errors left out.
func receiveExits(t *testing.T, ins backend.Instances, n int) []backend.InstanceExit {
	t.Helper()
	var out []backend.InstanceExit
	timeout := time.After(time.Minute)
	for len(out) < n {
		select {
		case x := <-ins.Exits():
			x.Err = nil
			out = append(out, x)
		case <-timeout:
			t.Fatalf("got %d exits in a minute, want %d: %+v", len(out), n, out)
		}
	}
	slices.SortFunc(out, func(a, b backend.InstanceExit) int {
		if c := strings.Compare(a.JobID, b.JobID); c != 0 {
			return c
		}
		return a.Instance - b.Instance
	})
	return out
}

// envOf returns the job container's environment; a value from a field
// reads "fieldRef:<path>".
func envOf(p corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		out[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	return out
}

func hasExitFinalizer(p corev1.Pod) bool {
	return slices.Contains(p.Finalizers, kubernetes.ExitFinalizer)
}
