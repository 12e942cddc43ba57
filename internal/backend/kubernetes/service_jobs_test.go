package kubernetes_test

import (
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/kubetest"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// TestServiceJobs runs a job through the service over SQLite on the
// cluster, as `capblock jobs run` does: its four instances are one
// Indexed Job whose pods run on the block's nodes, by rank; a node of the
// block that turns NotReady is replaced, and the job runs again on the
// replacement; a restart of the server adopts the run's pods, and their
// ends make the job succeed.
func TestServiceJobs(t *testing.T) {
	c := startJobsCluster(t)
	ctx := t.Context()
	nodes := c.addJobNodes(t, 6)
	c.teamNamespace(t, jobsNamespace, jobsTeam)
	be := c.newBackend(t, kubernetes.Config{})
	wl, err := kubernetes.NewWorkloads(be, kubernetes.JobsConfig{Image: "trainer:1"})
	if err != nil {
		t.Fatal(err)
	}

	// 1. A block of four whole nodes of the six, stored before the start,
	// from one hour on.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	blk := core.Block{ID: "cb-train", Team: jobsTeam, InstanceType: "h100.8x", GPUModel: "H100", Count: 4, Zone: "zone-a",
		Start: t0.Add(time.Hour), End: t0.Add(5 * time.Hour), State: core.StateScheduled, CreatedAt: t0,
		Fee: core.Money{Minor: 1, Currency: "USD"}}
	for _, n := range nodes[:4] {
		blk.Placements = append(blk.Placements, core.Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{blk}}); err != nil {
		t.Fatal(err)
	}
	sim := clock.NewSim(t0)
	serve := func() (*service.Service, func()) {
		svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: be, Workloads: wl, Clock: sim,
			Log: slog.New(slog.DiscardHandler), EnginePoll: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); svc.Run(runCtx) }()
		return svc, func() { stop(); <-ran }
	}
	svc, stop := serve()
	t.Cleanup(func() { stop() })

	// 2. The block starts; the job's run is a pod per rank on its nodes.
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	key := kubernetes.DefaultBlockLabelDomain + "/cb-train"
	kubetest.Eventually(t, "the block's nodes are labelled", func() (bool, error) { return len(c.labelled(t, key)) == 4, nil })
	job, err := svc.CreateJob(ctx, "", contract.JobRequest{BlockID: blk.ID, Command: []string{"python", "train.py"}, InstanceCount: 4})
	if err != nil {
		t.Fatal(err)
	}
	run1 := job.ID + "/1"
	pods := c.runningPods(t, run1, 4)
	if diff := cmp.Diff(nodes[:4], podNodes(pods)); diff != "" {
		t.Errorf("the first run's nodes (-block +pods):\n%s", diff)
	}
	if n := len(c.jobs(t)); n != 1 {
		t.Errorf("%d Jobs for one run, want 1", n)
	}

	// 3. A node of the block turns NotReady: the block moves to a free
	// node, and the job runs again there once the first run's pods are
	// gone. (KWOK still deletes the failed node's pod at once; a kubelet
	// that stopped would leave it being deleted, and its end would come
	// when its grace period is over: TestPodEnd.)
	failed := pods[2].Spec.NodeName
	c.setReady(t, failed, false)
	kubetest.Eventually(t, "the block's label moved off the failed node", func() (bool, error) {
		l := c.labelled(t, key)
		return len(l) == 4 && l[failed] == "", nil
	})
	moved := slices.Sorted(maps.Keys(c.labelled(t, key)))
	run2 := job.ID + "/2"
	var again []corev1.Pod
	within(t, 2*time.Minute, "the second run's pods run", func() bool {
		again = c.podsOf(t, run2)
		return len(again) == 4 && !slices.ContainsFunc(again, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
	})
	if diff := cmp.Diff(moved, podNodes(again)); diff != "" {
		t.Errorf("the second run's nodes (-block +pods):\n%s", diff)
	}
	for i, p := range again {
		if env := envOf(p); env["CAPBLOCK_RESTART_COUNT"] != "0" || p.Annotations["batch.kubernetes.io/job-completion-index"] != strconv.Itoa(i) {
			t.Errorf("pod %s: restart count %s (a move is no failure: want 0), index %s", p.Name, env["CAPBLOCK_RESTART_COUNT"],
				p.Annotations["batch.kubernetes.io/job-completion-index"])
		}
	}

	// 4. A restart of the server adopts the run; its ends make the job
	// succeed.
	stop()
	svc, stop = serve()
	for _, p := range again {
		c.endPod(t, p, 0)
	}
	within(t, time.Minute, "the job succeeded", func() bool {
		j, err := svc.GetJob(ctx, "", job.ID)
		return err == nil && j.State == core.JobSucceeded
	})
	if j, _ := svc.GetJob(ctx, "", job.ID); j.Run != 2 {
		t.Errorf("the job ended at run %d, want 2: the restart adopts the run rather than start another", j.Run)
	}
}

// TestServiceActivationAfterRestart: a server killed in the middle of a
// block's activation (two of its four nodes labelled) leaves the action
// stored; the next server's start completes it.
func TestServiceActivationAfterRestart(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	nodes, err := c.AddGPUNodes(ctx, 4, 8, "zone-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	be := c.newBackend(t, kubernetes.Config{})
	t0 := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	blk := core.Block{ID: "cb-killed", Team: jobsTeam, InstanceType: "h100.8x", GPUModel: "H100", Count: 4, Zone: "zone-a",
		Start: t0.Add(time.Hour), End: t0.Add(5 * time.Hour), State: core.StateScheduled, CreatedAt: t0,
		Fee: core.Money{Minor: 1, Currency: "USD"}}
	for _, n := range nodes {
		blk.Placements = append(blk.Placements, core.Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{blk}}); err != nil {
		t.Fatal(err)
	}
	sim := clock.NewSim(t0)
	run := func(engine backend.Backend) func() {
		svc, err := service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: engine, Clock: sim,
			Log: slog.New(slog.DiscardHandler), EnginePoll: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { defer close(ran); svc.Run(runCtx) }()
		return func() { stop(); <-ran }
	}

	// 1. The first server labels two nodes, and is killed.
	halfway := &halfActivation{Backend: be, reached: make(chan struct{})}
	stop := run(halfway)
	if _, err := sim.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-halfway.reached:
	case <-time.After(time.Minute):
		t.Fatal("the block's activation did not start in a minute")
	}
	stop()
	key := kubernetes.DefaultBlockLabelDomain + "/cb-killed"
	if got := c.labelled(t, key); len(got) != 2 {
		t.Fatalf("labelled before the kill: %v, want two nodes", got)
	}

	// 2. The next server completes the activation.
	stop = run(be)
	t.Cleanup(stop)
	kubetest.Eventually(t, "the block's four nodes are labelled", func() (bool, error) { return len(c.labelled(t, key)) == 4, nil })
}

// halfActivation activates half of a block's nodes, then hangs until its
// call is given up: a server killed in the middle of an activation.
type halfActivation struct {
	*kubernetes.Backend
	reached chan struct{}
	once    sync.Once
}

func (h *halfActivation) Activate(ctx context.Context, b core.Block) error {
	half := b
	half.Placements = b.Placements[:len(b.Placements)/2]
	if err := h.Backend.Activate(ctx, half); err != nil {
		return err
	}
	h.once.Do(func() { close(h.reached) })
	<-ctx.Done()
	return ctx.Err()
}

// podNodes are the pods' nodes, sorted.
func podNodes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	sort.Strings(out)
	return out
}

// within polls done every 100 ms until it holds, for at most d.
func within(t *testing.T, d time.Duration, what string, done func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return done(), nil
	})
	if err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}
