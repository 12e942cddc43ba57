package kubernetes_test

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/core"
	"capblock/internal/kubetest"
)

// testCluster is a running control plane, its admin's client, and a
// client configuration of capblock's ServiceAccount, which holds only
// kubernetes.PolicyRules: every backend in these tests runs as it, so
// that the tests fail if the backend needs a right the rules lack.
type testCluster struct {
	*kubetest.Cluster
	admin clientset.Interface
	sa    *rest.Config
}

func startCluster(t *testing.T) *testCluster {
	t.Helper()
	c := kubetest.Start(t, kubetest.Options{})
	admin := clientset.NewForConfigOrDie(c.AdminConfig())
	ctx := t.Context()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capblock"}, Rules: kubernetes.PolicyRules()}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capblock"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capblock"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "capblock-system", Name: "capblock"}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := c.ServiceAccountConfig(ctx, "capblock-system", "capblock")
	if err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer learns the binding from a watch.
	saClient := clientset.NewForConfigOrDie(sa)
	kubetest.Eventually(t, "the ServiceAccount may list nodes", func() (bool, error) {
		_, err := saClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	return &testCluster{Cluster: c, admin: admin, sa: sa}
}

// newBackend builds a backend as capblock's ServiceAccount, closed when
// t ends.
func (c *testCluster) newBackend(t testing.TB, cfg kubernetes.Config) *kubernetes.Backend {
	t.Helper()
	cfg.REST = c.sa
	be, err := kubernetes.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(be.Close)
	return be
}

// block is a block of one team on whole 8-GPU nodes.
func block(id, team string, nodes ...string) core.Block {
	b := core.Block{ID: id, Team: team, InstanceType: "h100.8x", GPUModel: "H100", Count: len(nodes), Zone: "zone-a",
		Start: time.Now().Add(-time.Hour), End: time.Now().Add(time.Hour), State: core.StateActive}
	for _, n := range nodes {
		b.Placements = append(b.Placements, core.Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	}
	return b
}

// labelled returns the nodes that carry key, with its value, sorted.
func (c *testCluster) labelled(t *testing.T, key string) map[string]string {
	t.Helper()
	list, err := c.admin.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: key})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Labels[key]
	}
	return out
}

// runPod starts a pod bound to node (no scheduler) with labels, and
// returns its UID.
func (c *testCluster) runPod(t *testing.T, name, node string, labels map[string]string) types.UID {
	t.Helper()
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Tolerations:                   []corev1.Toleration{{Key: kubernetes.DefaultTaint.Key, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "main", Image: "trainer:latest",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubernetes.GPUResource: resource.MustParse("1")}}}},
		},
	}
	got, err := c.admin.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.UID
}

// pods returns the names of the default namespace's pods that are not
// leaving, sorted.
func (c *testCluster) pods(t *testing.T) []string {
	t.Helper()
	list, err := c.admin.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// inventoryNames returns the names of the backend's inventory.
func inventoryNames(t *testing.T, be *kubernetes.Backend) []string {
	t.Helper()
	nodes, err := be.Inventory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// unhealthy returns the backend's unhealthy nodes and their reasons.
func unhealthy(t *testing.T, be *kubernetes.Backend) map[string]string {
	t.Helper()
	recs, err := be.NodeHealth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r.Node] = r.Reason
	}
	return out
}

// pdb guards the pods with labels: none of them may be evicted.
func (c *testCluster) pdb(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	one := intstr.FromInt32(1)
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := c.admin.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return slices.Clip(out)
}
