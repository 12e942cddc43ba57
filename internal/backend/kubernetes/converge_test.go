package kubernetes_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"capblock/internal/backend"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
	"capblock/internal/kubetest"
)

// TestConvergence drifts nodes of the real API server away from the
// desired state, each way the issue names, and sees the backend repair
// every one and touch nothing of anyone else's.
func TestConvergence(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	nodes, err := c.AddGPUNodes(ctx, 6, 8, "zone-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	be := c.newBackend(t, kubernetes.Config{ResyncEvery: time.Hour}) // events, not the resync, must repair
	blk := block("blk-a", "team-a", nodes[0], nodes[1])
	blk.Version = 3
	other := block("blk-b", "team-b", nodes[2])
	other.Version = 1
	other.State = core.StateScheduled // live, but holds no node yet
	be.Converge(&backend.Desired{Epoch: 1, Blocks: []core.Block{blk, other}})
	key := kubernetes.DefaultBlockLabelDomain + "/blk-a"
	want := map[string]string{nodes[0]: "team-a", nodes[1]: "team-a"}
	waitLabels := func(what, key string, want map[string]string) {
		t.Helper()
		start := time.Now()
		kubetest.Eventually(t, what, func() (bool, error) {
			got := c.labelled(t, key)
			return mapsEqual(got, want), nil
		})
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	}
	waitLabels("the active block's nodes carry its label", key, want)
	if got := c.labelled(t, kubernetes.DefaultBlockLabelDomain+"/blk-b"); len(got) != 0 {
		t.Fatalf("a scheduled block's label is on %v", got)
	}

	t.Run("label removed by hand", func(t *testing.T) {
		c.patchNode(t, nodes[0], map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
		waitLabels("the removed label is back", key, want)
	})
	t.Run("label changed by hand", func(t *testing.T) {
		c.patchNode(t, nodes[1], map[string]any{"metadata": map[string]any{"labels": map[string]any{key: "team-x"}}})
		waitLabels("the label's value is the team's again", key, want)
	})
	t.Run("node re-created", func(t *testing.T) {
		if err := c.admin.CoreV1().Nodes().Delete(ctx, nodes[1], metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, "the node is gone", func() (bool, error) {
			_, err := c.admin.CoreV1().Nodes().Get(ctx, nodes[1], metav1.GetOptions{})
			return err != nil, nil
		})
		if err := c.RecreateGPUNode(ctx, nodes[1], 8, "zone-a", nil); err != nil {
			t.Fatal(err)
		}
		waitLabels("the re-created node carries the block's label", key, want)
		kubetest.Eventually(t, "the re-created node is tainted", func() (bool, error) {
			return c.tainted(t)[nodes[1]], nil
		})
	})
	t.Run("taint removed", func(t *testing.T) {
		c.patchNode(t, nodes[3], map[string]any{"spec": map[string]any{"taints": nil}})
		kubetest.Eventually(t, "the taint is back", func() (bool, error) { return c.tainted(t)[nodes[3]], nil })
	})
	t.Run("labels of other blocks added by hand", func(t *testing.T) {
		// blk-b is live but holds no node; blk-z is known to nobody; the
		// third label and the annotation are someone else's.
		c.patchNode(t, nodes[0], map[string]any{"metadata": map[string]any{
			"labels": map[string]any{kubernetes.DefaultBlockLabelDomain + "/blk-b": "team-b",
				kubernetes.DefaultBlockLabelDomain + "/blk-z": "team-z", "example.com/owner": "ops"},
			"annotations": map[string]any{"example.com/note": "kept"},
		}})
		waitLabels("blk-b's label is gone", kubernetes.DefaultBlockLabelDomain+"/blk-b", map[string]string{})
		waitLabels("blk-z's label is gone", kubernetes.DefaultBlockLabelDomain+"/blk-z", map[string]string{})
		n, err := c.admin.CoreV1().Nodes().Get(ctx, nodes[0], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["example.com/owner"] != "ops" || n.Annotations["example.com/note"] != "kept" || n.Labels[key] != "team-a" {
			t.Fatalf("the repair touched what is not its own: labels %v, annotations %v", n.Labels, n.Annotations)
		}
	})
	t.Run("unsold node left alone", func(t *testing.T) {
		cpu, err := c.AddCPUNode(ctx, "cpu-0")
		if err != nil {
			t.Fatal(err)
		}
		c.patchNode(t, cpu, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: "team-a"}}})
		time.Sleep(500 * time.Millisecond) // a repair would have come by now; nothing must
		if got := c.labelled(t, key)[cpu]; got != "team-a" {
			t.Fatalf("the label on an unsold node was changed to %q", got)
		}
		c.patchNode(t, cpu, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
	})
	t.Run("a stale activation is refused", func(t *testing.T) {
		late := block("blk-c", "team-c", nodes[4])
		late.Version = 4
		if err := be.Release(ctx, late); err != nil {
			t.Fatal(err)
		}
		before := be.WriteCounts()
		late.Version = 3
		if err := be.Activate(ctx, late); err != nil {
			t.Fatal(err)
		}
		after := be.WriteCounts()
		if after.Refused != before.Refused+1 || after.Written != before.Written {
			t.Fatalf("a late activation of version 3 after the release of version 4: counts went from %+v to %+v", before, after)
		}
		if got := c.labelled(t, kubernetes.DefaultBlockLabelDomain+"/blk-c"); len(got) != 0 {
			t.Fatalf("the late activation labelled %v", got)
		}
		// And a newer one is taken.
		late.Version = 5
		if err := be.Activate(ctx, late); err != nil {
			t.Fatal(err)
		}
		if got := c.labelled(t, kubernetes.DefaultBlockLabelDomain+"/blk-c"); got[nodes[4]] != "team-c" {
			t.Fatalf("the activation of version 5 labelled %v", got)
		}
	})
	t.Run("a block the leader does not know yet keeps its label for the grace", func(t *testing.T) {
		fresh := block("blk-d", "team-d", nodes[5])
		fresh.Version = 1
		if err := be.Activate(ctx, fresh); err != nil { // the action ran before the desired state names it
			t.Fatal(err)
		}
		start := time.Now()
		waitLabels("an unknown block's label goes after the grace", kubernetes.DefaultBlockLabelDomain+"/blk-d", map[string]string{})
		if waited := time.Since(start); waited < backend.UnknownGrace/2 {
			t.Fatalf("the label of a block written by capblock went after %v, before the grace of %v", waited, backend.UnknownGrace)
		}
		// blk-c went the same way (activated above, unknown to the desired state).
		waitLabels("blk-c's label went too", kubernetes.DefaultBlockLabelDomain+"/blk-c", map[string]string{})
	})
	t.Run("pods of a block that is over", func(t *testing.T) {
		podLabel := kubernetes.DefaultPodBlockLabel
		c.runPod(t, "of-live-block", nodes[0], map[string]string{podLabel: "blk-a"})
		c.runPod(t, "of-ended-block", nodes[0], map[string]string{podLabel: "blk-gone"})
		cpu, err := c.AddCPUNode(ctx, "cpu-1")
		if err != nil {
			t.Fatal(err)
		}
		c.runPod(t, "on-unsold-node", cpu, map[string]string{podLabel: "blk-gone"})
		c.runPod(t, "of-no-block", nodes[0], nil)
		kubetest.Eventually(t, "the pod of the ended block is deleted", func() (bool, error) {
			return !slices.Contains(c.pods(t), "of-ended-block"), nil
		})
		time.Sleep(500 * time.Millisecond)
		if got, want := c.pods(t), []string{"of-live-block", "of-no-block", "on-unsold-node"}; !slices.Equal(got, want) {
			t.Fatalf("pods left: %v, want %v", got, want)
		}
	})
	t.Run("no repairs once told to stop", func(t *testing.T) {
		be.Converge(nil)
		c.patchNode(t, nodes[0], map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
		time.Sleep(time.Second)
		if got := c.labelled(t, key); got[nodes[0]] != "" {
			t.Fatalf("a backend told to stop repaired node %s", nodes[0])
		}
		be.Converge(&backend.Desired{Epoch: 2, Blocks: []core.Block{blk, other}})
		waitLabels("the repairs start again with a new desired state", key, want)
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// patchNode merge-patches node name as the cluster's admin.
func (c *testCluster) patchNode(t *testing.T, name string, patch map[string]any) {
	t.Helper()
	data, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
