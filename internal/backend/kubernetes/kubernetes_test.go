package kubernetes_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
	"capblock/internal/kubetest"
)

// models is the fleet's mapping in these tests: H100 and SXM A100s are
// sold, PCIe A100s are not.
var models = []kubernetes.ModelPattern{
	{Glob: "NVIDIA-H100*", Model: "H100"},
	{Glob: "NVIDIA-A100-PCIE*", Model: ""},
	{Glob: "NVIDIA-A100*", Model: "A100"},
}

const (
	rack = kubernetes.DefaultRackLabel
	a100 = "NVIDIA-A100-SXM4-80GB"
)

// TestKubernetes runs the backend on one cluster, its steps in order:
// each builds on the nodes and blocks of the ones before.
func TestKubernetes(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	// 16 nodes of 8 GPUs: H100s in zone-a on two racks, A100s in zone-b
	// on one; and two that are not sold: a PCIe A100 (mapped to no
	// model) and a B200 (a model that the fleet does not sell).
	for _, g := range []struct {
		n      int
		zone   string
		labels map[string]string
	}{
		{4, "zone-a", map[string]string{rack: "a-r1"}},
		{4, "zone-a", map[string]string{rack: "a-r2"}},
		{8, "zone-b", map[string]string{rack: "b-r1", kubetest.GPUProductLabel: a100}},
		{1, "zone-c", map[string]string{kubetest.GPUProductLabel: "NVIDIA-A100-PCIE-40GB"}},
		{1, "zone-c", map[string]string{kubetest.GPUProductLabel: "NVIDIA-B200"}},
	} {
		if _, err := c.AddGPUNodes(ctx, g.n, 8, g.zone, g.labels); err != nil {
			t.Fatal(err)
		}
	}
	a := names("gpu-zone-a-", 8)                   // gpu-zone-a-0 … 7
	b := []string{"gpu-zone-b-8", "gpu-zone-b-15"} // the first and the last of zone-b
	unsold := []string{"gpu-zone-c-16", "gpu-zone-c-17"}
	start := time.Now()
	be := c.newBackend(t, kubernetes.Config{GPUModels: models, SoldModels: []string{"H100", "A100"}})
	t.Logf("backend ready on 18 nodes in %v", time.Since(start).Round(time.Millisecond))

	t.Run("discovery", func(t *testing.T) {
		got, err := be.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []core.Node
		for i := range 16 {
			n := core.Node{Name: fmt.Sprintf("gpu-zone-a-%d", i), Zone: "zone-a", Rack: "a-r1", GPUModel: "H100", GPUs: 8,
				Health: core.Healthy, Labels: map[string]string{kubetest.GPUProductLabel: kubetest.DefaultProduct}}
			switch {
			case i >= 8:
				n.Name, n.Zone, n.Rack, n.GPUModel = fmt.Sprintf("gpu-zone-b-%d", i), "zone-b", "b-r1", "A100"
				n.Labels = map[string]string{kubetest.GPUProductLabel: a100}
			case i >= 4:
				n.Rack = "a-r2"
			}
			want = append(want, n)
		}
		slices.SortFunc(want, func(x, y core.Node) int { return strings.Compare(x.Name, y.Name) })
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("inventory (-want +got):\n%s", diff)
		}
		if h := unhealthy(t, be); len(h) != 0 {
			t.Errorf("unhealthy nodes: %v, want none", h)
		}
	})

	t.Run("every sold node is tainted, and only those", func(t *testing.T) {
		kubetest.Eventually(t, "the 16 sold nodes are tainted", func() (bool, error) {
			return len(c.tainted(t)) == 16, nil
		})
		for _, n := range unsold {
			if c.tainted(t)[n] {
				t.Errorf("the unsold node %s is tainted", n)
			}
		}
	})

	t.Run("a node that joins is sold and tainted; a taint removed comes back", func(t *testing.T) {
		added, err := c.AddGPUNodes(ctx, 1, 8, "zone-a", map[string]string{rack: "a-r2"})
		if err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "the new node is in the inventory and tainted", func() (bool, error) {
			return slices.Contains(inventoryNames(t, be), added[0]) && c.tainted(t)[added[0]], nil
		})
		patch := []byte(`{"spec":{"taints":null}}`)
		if _, err := c.admin.CoreV1().Nodes().Patch(ctx, added[0], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "the taint is back", func() (bool, error) { return c.tainted(t)[added[0]], nil })
		if err := c.admin.CoreV1().Nodes().Delete(ctx, added[0], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("NotReady and cordoned nodes are unhealthy, and healthy again after", func(t *testing.T) {
		notReady, cordoned := a[6], a[7]
		c.setReady(t, notReady, false)
		c.cordon(t, cordoned, true)
		kubetest.Eventually(t, "both are unhealthy", func() (bool, error) {
			h := unhealthy(t, be)
			return strings.HasPrefix(h[notReady], "NotReady since ") && h[cordoned] == "cordoned" && len(h) == 2, nil
		})
		if !slices.Contains(inventoryNames(t, be), notReady) {
			t.Errorf("the NotReady node %s left the inventory; it should stay, unhealthy", notReady)
		}
		c.setReady(t, notReady, true)
		c.cordon(t, cordoned, false)
		kubetest.Eventually(t, "both are healthy again", func() (bool, error) { return len(unhealthy(t, be)) == 0, nil })
	})

	t.Run("a GPU short in the allocatable makes a node unhealthy, not smaller", func(t *testing.T) {
		c.setAllocatable(t, b[0], 7)
		kubetest.Eventually(t, "it is unhealthy", func() (bool, error) { return unhealthy(t, be)[b[0]] == "7 of 8 GPUs allocatable", nil })
		c.setAllocatable(t, b[0], 8)
		kubetest.Eventually(t, "it is healthy again", func() (bool, error) { return len(unhealthy(t, be)) == 0, nil })
	})

	t.Run("a deleted node is gone from the inventory", func(t *testing.T) {
		if err := c.admin.CoreV1().Nodes().Delete(ctx, b[1], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "it is gone", func() (bool, error) {
			return !slices.Contains(inventoryNames(t, be), b[1]) && len(inventoryNames(t, be)) == 15, nil
		})
	})

	key1, key2 := kubernetes.DefaultBlockLabelDomain+"/cb-1", kubernetes.DefaultBlockLabelDomain+"/cb-2"
	cb1 := block("cb-1", "team-a", a[0], a[1], a[2], a[3])
	cb2 := block("cb-2", "team-b", a[4])
	t.Run("activate labels exactly the block's nodes, and again changes nothing", func(t *testing.T) {
		start := time.Now()
		if err := be.Activate(ctx, cb1); err != nil {
			t.Fatal(err)
		}
		t.Logf("4 nodes labelled in %v", time.Since(start).Round(time.Millisecond))
		want := map[string]string{a[0]: "team-a", a[1]: "team-a", a[2]: "team-a", a[3]: "team-a"}
		if diff := cmp.Diff(want, c.labelled(t, key1)); diff != "" {
			t.Errorf("nodes labelled %s (-want +got):\n%s", key1, diff)
		}
		before := c.allLabels(t)
		if err := be.Activate(ctx, cb1); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, c.allLabels(t)); diff != "" {
			t.Errorf("the nodes' labels after a second activation (-first +second):\n%s", diff)
		}
	})

	t.Run("a block moved by a replacement leaves its old node; a missing node is skipped", func(t *testing.T) {
		moved := block("cb-1", "team-a", a[0], a[1], a[2], a[5], b[1]) // a[3] replaced by a[5]; b[1] deleted
		if err := be.Activate(ctx, moved); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{a[0]: "team-a", a[1]: "team-a", a[2]: "team-a", a[5]: "team-a"}
		if diff := cmp.Diff(want, c.labelled(t, key1)); diff != "" {
			t.Errorf("nodes labelled %s (-want +got):\n%s", key1, diff)
		}
		cb1 = moved
	})

	t.Run("blocks sharing a node have a label each", func(t *testing.T) {
		shared := block("cb-2", "team-b", a[4], a[5])
		shared.Placements[1].GPUs = []int{6, 7} // cb-1 holds a[5] too
		if err := be.Activate(ctx, shared); err != nil {
			t.Fatal(err)
		}
		cb2 = shared
		got := c.allLabels(t)[a[5]]
		if got[key1] != "team-a" || got[key2] != "team-b" {
			t.Errorf("labels of the shared node %s: %v, want both blocks'", a[5], got)
		}
	})

	podLabel := func(id string) map[string]string { return map[string]string{kubernetes.DefaultPodBlockLabel: id} }
	t.Run("terminate evicts the block's pods and no other", func(t *testing.T) {
		c.runPod(t, "cb1-0", a[0], podLabel("cb-1"))
		c.runPod(t, "cb1-1", a[1], podLabel("cb-1"))
		c.runPod(t, "cb1-pending", "", podLabel("cb-1"))
		guarded := podLabel("cb-1")
		guarded["guard"] = "yes"
		c.runPod(t, "cb1-guarded", a[2], guarded)
		c.pdb(t, "guard", map[string]string{"guard": "yes"})
		c.runPod(t, "not-a-block", a[0], nil)
		c.runPod(t, "cb2-0", a[4], podLabel("cb-2"))

		err := be.Terminate(ctx, cb1)
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("Terminate with a pod under a disruption budget: err = %v, want Too Many Requests, to be tried again", err)
		}
		left := []string{"cb1-guarded", "cb2-0", "not-a-block"}
		kubetest.Eventually(t, "the pods that could go are gone", func() (bool, error) { return slices.Equal(c.pods(t), left), nil })

		ended := cb1
		ended.End = time.Now().Add(-time.Minute)
		if err := be.Terminate(ctx, ended); err != nil {
			t.Errorf("Terminate after the block's end: %v, want nil (the release deletes what a budget keeps)", err)
		}
		if got := c.pods(t); !slices.Equal(got, left) {
			t.Errorf("pods after Terminate past the end: %v, want %v", got, left)
		}
	})

	t.Run("release removes only the block's labels and deletes its pods left", func(t *testing.T) {
		for range 2 {
			if err := be.Release(ctx, cb1); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.labelled(t, key1); len(got) != 0 {
			t.Errorf("nodes still labelled %s: %v", key1, got)
		}
		want := map[string]string{a[4]: "team-b", a[5]: "team-b"}
		if diff := cmp.Diff(want, c.labelled(t, key2)); diff != "" {
			t.Errorf("another block's labels after the release (-want +got):\n%s", diff)
		}
		kubetest.Eventually(t, "the guarded pod is deleted", func() (bool, error) {
			return slices.Equal(c.pods(t), []string{"cb2-0", "not-a-block"}), nil
		})
		if err := be.Release(ctx, cb2); err != nil {
			t.Fatal(err)
		}
		if got := c.labelled(t, key2); len(got) != 0 {
			t.Errorf("nodes still labelled %s: %v", key2, got)
		}
	})

	t.Run("backendtest", func(t *testing.T) {
		c.addNode(t, "n0")
		backendtest.Exercise(t, func(t *testing.T) backend.Backend {
			return c.newBackend(t, kubernetes.Config{GPUModels: models})
		})
		if got := c.nodeLabels(t, "n0"); hasBlockLabel(got) {
			t.Errorf("n0 keeps a block's label after the suite released every block: %v", got)
		}
	})
}

// TestNew: New connects with a kubeconfig file; a role without the
// right to list nodes, a missing kubeconfig or a bad label stop it with
// what is wrong.
func TestNew(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	if _, err := c.AddGPUNodes(t.Context(), 1, 8, "zone-a", nil); err != nil {
		t.Fatal(err)
	}
	be, err := kubernetes.New(t.Context(), kubernetes.Config{Kubeconfig: c.Kubeconfig}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if got := inventoryNames(t, be); !slices.Equal(got, []string{"gpu-zone-a-0"}) {
		t.Errorf("the inventory through the kubeconfig file: %v, want [gpu-zone-a-0]", got)
	}
	cfg, err := c.ServiceAccountConfig(t.Context(), "capblock-system", "no-role")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.New(t.Context(), kubernetes.Config{REST: cfg}, nil)
	if !apierrors.IsForbidden(err) {
		t.Errorf("New without a role: err = %v, want Forbidden", err)
	}
	_, err = kubernetes.New(t.Context(), kubernetes.Config{Kubeconfig: "/nonexistent/kubeconfig"}, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("New with a missing kubeconfig: err = %v, want one naming the file", err)
	}
	_, err = kubernetes.New(t.Context(), kubernetes.Config{REST: cfg, RackLabel: "not a label"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"not a label"`) {
		t.Errorf("New with a bad rack label: err = %v, want one naming it", err)
	}
}

func hasBlockLabel(labels map[string]string) bool {
	for k := range labels {
		if strings.HasPrefix(k, kubernetes.DefaultBlockLabelDomain+"/") {
			return true
		}
	}
	return false
}

// tainted returns the nodes that carry the sold taint.
func (c *testCluster) tainted(t *testing.T) map[string]bool {
	t.Helper()
	list, err := c.admin.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range list.Items {
		for _, taint := range n.Spec.Taints {
			if taint.MatchTaint(&kubernetes.DefaultTaint) && taint.Value == kubernetes.DefaultTaint.Value {
				out[n.Name] = true
			}
		}
	}
	return out
}

// allLabels returns every node's labels.
func (c *testCluster) allLabels(t *testing.T) map[string]map[string]string {
	t.Helper()
	list, err := c.admin.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Labels
	}
	return out
}

func (c *testCluster) nodeLabels(t *testing.T, name string) map[string]string {
	t.Helper()
	n, err := c.admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return maps.Clone(n.Labels)
}

// setReady makes node NotReady, or Ready again. KWOK plays the kubelet
// of the nodes annotated as fake and would set them Ready at once: a
// NotReady node is first taken from it, as a kubelet that stopped.
func (c *testCluster) setReady(t *testing.T, name string, ready bool) {
	t.Helper()
	ctx := t.Context()
	nodes := c.admin.CoreV1().Nodes()
	if ready {
		patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":"fake"}}}`)
		if _, err := nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":null}}}`)
	if _, err := nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
		Message: "container runtime is down", LastHeartbeatTime: now, LastTransitionTime: now}
	c.updateStatus(t, name, func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = cond
			}
		}
	})
}

func (c *testCluster) setAllocatable(t *testing.T, name string, gpus int64) {
	t.Helper()
	c.updateStatus(t, name, func(n *corev1.Node) {
		n.Status.Allocatable[kubetest.GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	})
}

// updateStatus changes node's status, again on a conflict with KWOK's
// heartbeat.
func (c *testCluster) updateStatus(t *testing.T, name string, change func(*corev1.Node)) {
	t.Helper()
	kubetest.Eventually(t, "updating the status of "+name, func() (bool, error) {
		n, err := c.admin.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		change(n)
		_, err = c.admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
		return err == nil, err
	})
}

func (c *testCluster) cordon(t *testing.T, name string, on bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%v}}`, on)
	if _, err := c.admin.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// addNode adds a Ready 8-GPU H100 node of the given name in zone-a.
func (c *testCluster) addNode(t *testing.T, name string) {
	t.Helper()
	gpus := resource.MustParse("8")
	capacity := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110"), kubetest.GPUResource: gpus}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{corev1.LabelTopologyZone: "zone-a", kubetest.GPUProductLabel: kubetest.DefaultProduct}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
	if _, err := c.admin.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
