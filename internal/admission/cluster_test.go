package admission_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"capblock/internal/admission"
	"capblock/internal/backend/kubernetes"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/kubetest"
	"capblock/internal/service"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// capblockOnCluster is a control plane where deploy/kubernetes's rights
// are applied and capblock runs as its ServiceAccount, with them and
// nothing more: the service over SQLite on the Kubernetes backend, and
// the admission webhooks, registered from webhook.yaml, served over TLS
// on 127.0.0.1.
type capblockOnCluster struct {
	*kubetest.Cluster
	admin clientset.Interface
	sa    *rest.Config
	sim   *clock.Sim
	svc   *service.Service
	be    *kubernetes.Backend
	nodes []string
}

// startCapblock starts it with the blocks that blocks makes on the
// cluster's nodes, stored before the service starts, the simulated clock
// at t0.
func startCapblock(t *testing.T, t0 time.Time, blocks func(nodes []string) []core.Block) *capblockOnCluster {
	t.Helper()
	ctx := t.Context()
	m := loadManifests(t)
	c := kubetest.Start(t, kubetest.Options{})
	admin := clientset.NewForConfigOrDie(c.AdminConfig())
	e := &capblockOnCluster{Cluster: c, admin: admin}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	// 1. deploy/kubernetes's namespace, ServiceAccount, ClusterRole and
	// binding, as the files have them.
	must(t, kubetest.Create(ctx, admin.CoreV1().Namespaces(), m.namespace))
	must(t, kubetest.Create(ctx, admin.CoreV1().ServiceAccounts(m.account.Namespace), m.account))
	must(t, kubetest.Create(ctx, admin.RbacV1().ClusterRoles(), m.role))
	must(t, kubetest.Create(ctx, admin.RbacV1().ClusterRoleBindings(), m.binding))
	sa, err := c.ServiceAccountConfig(ctx, m.account.Namespace, m.account.Name)
	must(t, err)
	e.sa = sa
	saClient := clientset.NewForConfigOrDie(sa)
	kubetest.Eventually(t, "the ServiceAccount's binding is in force", func() (bool, error) {
		_, err := saClient.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, err
	})

	// 2. Three GPU nodes, and the backend as the ServiceAccount.
	e.nodes, err = c.AddGPUNodes(ctx, 3, 8, "zone-a", map[string]string{kubernetes.DefaultRackLabel: "a-r1"})
	must(t, err)
	e.be, err = kubernetes.New(ctx, kubernetes.Config{REST: sa}, log)
	must(t, err)
	t.Cleanup(e.be.Close)

	// 3. The service over SQLite, on the simulated clock.
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "capblock.db"))
	must(t, err)
	t.Cleanup(func() { st.Close() })
	for _, team := range []string{"team-a", "team-b"} {
		must(t, st.CreateTeam(ctx, core.Team{ID: team, Name: team, CreatedAt: t0}))
	}
	must(t, st.Commit(ctx, store.Change{Insert: blocks(e.nodes)}))
	e.sim = clock.NewSim(t0)
	e.svc, err = service.New(ctx, service.Config{Fleet: fleet.Demo(), Store: st, Backend: e.be, Clock: e.sim, Log: log, EnginePoll: 100 * time.Millisecond})
	must(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = e.svc.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })

	// 4. Admission as the ServiceAccount, served over TLS.
	namespaces, err := admission.NewNamespaceCache(ctx, sa, 30*time.Second)
	must(t, err)
	t.Cleanup(namespaces.Close)
	h, err := admission.New(admission.Config{Service: e.svc, Namespaces: namespaces, Log: log})
	must(t, err)
	pki := newTestPKI(t)
	srv, err := admission.NewServer(h, pki.certFile, pki.keyFile)
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	// 5. The webhooks of webhook.yaml, pointed at it.
	base := "https://" + ln.Addr().String()
	mutating, validating := m.mutating.DeepCopy(), m.validating.DeepCopy()
	for i := range mutating.Webhooks {
		url := base + admission.MutatePath
		mutating.Webhooks[i].ClientConfig.Service, mutating.Webhooks[i].ClientConfig.URL, mutating.Webhooks[i].ClientConfig.CABundle = nil, &url, pki.caPEM
	}
	for i := range validating.Webhooks {
		url := base + admission.ValidatePath
		validating.Webhooks[i].ClientConfig.Service, validating.Webhooks[i].ClientConfig.URL, validating.Webhooks[i].ClientConfig.CABundle = nil, &url, pki.caPEM
	}
	must(t, kubetest.Create(ctx, admin.AdmissionregistrationV1().MutatingWebhookConfigurations(), mutating))
	must(t, kubetest.Create(ctx, admin.AdmissionregistrationV1().ValidatingWebhookConfigurations(), validating))
	return e
}

// teamNamespace makes namespace name of team, and a user allowed to
// manage pods there and nothing else; it returns the user's client.
func (e *capblockOnCluster) teamNamespace(t *testing.T, name, team string) clientset.Interface {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{admission.TeamLabel: team}}}
	must(t, kubetest.Create(ctx, e.admin.CoreV1().Namespaces(), ns))
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "list", "watch", "update", "patch", "delete"}},
	}}
	must(t, kubetest.Create(ctx, e.admin.RbacV1().Roles(name), role))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: name, Name: "user"}},
	}
	must(t, kubetest.Create(ctx, e.admin.RbacV1().RoleBindings(name), binding))
	cfg, err := e.ServiceAccountConfig(ctx, name, "user")
	must(t, err)
	user := clientset.NewForConfigOrDie(cfg)
	kubetest.Eventually(t, "the user of "+name+" may list its pods", func() (bool, error) {
		_, err := user.CoreV1().Pods(name).List(ctx, metav1.ListOptions{})
		return err == nil, err
	})
	return user
}

// TestAdmission: on a cluster where capblock runs with deploy/kubernetes's
// rights, a team's pod naming its active block lands on the block's
// node, with the toleration and affinity that admission adds; another
// team's pod naming it, copying the toleration, tolerating every taint
// or naming the node is refused; a pod of a block not active yet waits
// Pending and lands when the block starts; and the backend evicts and
// deletes the block's pods with those rights.
func TestAdmission(t *testing.T) {
	ctx := t.Context()
	t0 := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	blk := func(id, team string, start time.Duration, node string) core.Block {
		return core.Block{ID: id, Team: team, InstanceType: "h100.8x", GPUModel: "H100", Count: 1, Zone: "zone-a",
			Start: t0.Add(start), End: t0.Add(start + 4*time.Hour), State: core.StateScheduled, CreatedAt: t0,
			Fee: core.Money{Minor: 1, Currency: "USD"}, Placements: []core.Placement{{Node: node, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	}
	e := startCapblock(t, t0, func(nodes []string) []core.Block {
		return []core.Block{blk("cb-a1", "team-a", time.Hour, nodes[0]), blk("cb-a2", "team-a", 2*time.Hour, nodes[1]), blk("cb-b", "team-b", time.Hour, nodes[2])}
	})
	alice := e.teamNamespace(t, "ml-a", "team-a")
	bob := e.teamNamespace(t, "ml-b", "team-b")

	// 1. cb-a1 and cb-b start: their nodes are labelled; every node is
	// tainted.
	_, err := e.sim.Advance(time.Hour)
	must(t, err)
	kubetest.Eventually(t, "cb-a1's node is labelled and every node tainted", func() (bool, error) {
		list, err := e.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			if !tainted(n) {
				return false, nil
			}
		}
		n, err := e.admin.CoreV1().Nodes().Get(ctx, e.nodes[0], metav1.GetOptions{})
		return err == nil && n.Labels["block.capblock.io/cb-a1"] == "team-a", err
	})
	kubetest.Eventually(t, "the webhooks are in force", func() (bool, error) {
		_, err := bob.CoreV1().Pods("ml-b").Create(ctx, gpuPod("probe", "").tolerate(wildcard).pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "tolerates every taint"), nil
	})

	// 2. Alice's pod names her block, and nothing else: it gets the
	// toleration and the affinity, and lands on the block's node.
	got, err := alice.CoreV1().Pods("ml-a").Create(ctx, gpuPod("train", "cb-a1").pod, metav1.CreateOptions{})
	must(t, err)
	wantTolerations := []corev1.Toleration{{Key: "capblock.io/sold", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTolerations, capblockTolerations(got)); diff != "" {
		t.Errorf("the pod's toleration of the taint (-want +got):\n%s", diff)
	}
	wantTerms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "block.capblock.io/cb-a1", Operator: corev1.NodeSelectorOpExists}}}}
	if diff := cmp.Diff(wantTerms, got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms); diff != "" {
		t.Errorf("the pod's required node affinity (-want +got):\n%s", diff)
	}
	e.eventuallyOn(t, alice, "ml-a", "train", e.nodes[0])

	// 3. Bob's pods, each a way onto cb-a1's node, are refused.
	copied := gpuPod("copy", "cb-a1").tolerate(soldToleration).selectBlock("cb-a1")
	refusals := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"naming another team's block":         {copied.pod, "block cb-a1 is not held by team team-b, the team of namespace ml-b"},
		"naming a block that does not exist":  {gpuPod("copy", "cb-zz").tolerate(soldToleration).selectBlock("cb-zz").pod, "block cb-zz is not held by team team-b, the team of namespace ml-b"},
		"copying the toleration and selector": {gpuPod("copy", "").tolerate(soldToleration).selectBlock("cb-a1").pod, "tolerates capblock's taint capblock.io/sold=true:NoSchedule, but names no block"},
		"tolerating every taint":              {gpuPod("copy", "").tolerate(wildcard).pod, "tolerates every taint"},
		"naming the node":                     {gpuPod("copy", "").onNode(e.nodes[0]).pod, "sets spec.nodeName to " + e.nodes[0] + ", a node that capblock sells"},
	}
	for name, tc := range refusals {
		_, err := bob.CoreV1().Pods("ml-b").Create(ctx, tc.pod, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bob's pod %s: %v; want a refusal saying %q", name, err, tc.want)
		}
	}

	// 4. In kube-system, exempt, a pod tolerating every taint is created.
	ds := gpuPod("agent", "").tolerate(wildcard).pod
	ds.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	_, err = e.admin.CoreV1().Pods("kube-system").Create(ctx, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	must(t, err)

	// 5. Alice may not move her pod to another block.
	train, err := alice.CoreV1().Pods("ml-a").Get(ctx, "train", metav1.GetOptions{})
	must(t, err)
	train.Labels["capblock.io/block"] = "cb-a2"
	if _, err := alice.CoreV1().Pods("ml-a").Update(ctx, train, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("moving a pod to another block: %v; want a refusal", err)
	}

	// 6. A pod of cb-a2, which starts in an hour, is admitted and waits
	// Pending: no node has its label yet. It lands when cb-a2 starts.
	_, err = alice.CoreV1().Pods("ml-a").Create(ctx, gpuPod("early", "cb-a2").pod, metav1.CreateOptions{})
	must(t, err)
	kubetest.Eventually(t, "the early pod is unschedulable", func() (bool, error) {
		p, err := alice.CoreV1().Pods("ml-a").Get(ctx, "early", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return p.Spec.NodeName == "", nil
			}
		}
		return false, nil
	})
	_, err = e.sim.Advance(time.Hour)
	must(t, err)
	e.eventuallyOn(t, alice, "ml-a", "early", e.nodes[1])

	// 7. The backend, with deploy/kubernetes's rights, evicts cb-a1's
	// pod at its termination and deletes cb-a2's at its release.
	a1, err := e.svc.GetBlock(ctx, "team-a", "cb-a1")
	must(t, err)
	must(t, e.be.Terminate(ctx, a1))
	a2, err := e.svc.GetBlock(ctx, "team-a", "cb-a2")
	must(t, err)
	must(t, e.be.Release(ctx, a2))
	for _, name := range []string{"train", "early"} {
		kubetest.Eventually(t, name+" is leaving", func() (bool, error) {
			p, err := alice.CoreV1().Pods("ml-a").Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), nil
		})
	}
}

// eventuallyOn waits until pod ns/name runs on node.
func (e *capblockOnCluster) eventuallyOn(t *testing.T, cs clientset.Interface, ns, name, node string) {
	t.Helper()
	kubetest.Eventually(t, name+" runs on "+node, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != node {
			return false, errors.New("it was scheduled on " + p.Spec.NodeName)
		}
		return p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning, nil
	})
}

// testPod builds the pods of TestAdmission.
type testPod struct{ pod *corev1.Pod }

// gpuPod is a pod asking for a whole node's 8 GPUs, naming block if not
// empty.
func gpuPod(name, block string) testPod {
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "train"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: "trainer:latest",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{kubernetes.GPUResource: resource.MustParse("8")}}}},
		},
	}
	if block != "" {
		p.Labels[kubernetes.DefaultPodBlockLabel] = block
	}
	return testPod{p}
}

func (p testPod) tolerate(t corev1.Toleration) testPod {
	p.pod.Spec.Tolerations = append(p.pod.Spec.Tolerations, t)
	return p
}

func (p testPod) selectBlock(id string) testPod {
	p.pod.Spec.NodeSelector = map[string]string{kubernetes.DefaultBlockLabelDomain + "/" + id: "team-a"}
	return p
}

func (p testPod) onNode(node string) testPod {
	p.pod.Spec.NodeName = node
	return p
}

var (
	soldToleration = corev1.Toleration{Key: kubernetes.DefaultTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	wildcard       = corev1.Toleration{Operator: corev1.TolerationOpExists}
)

// capblockTolerations are the pod's tolerations of capblock's taint's
// key (the API server adds others of its own).
func capblockTolerations(p *corev1.Pod) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range p.Spec.Tolerations {
		if t.Key == kubernetes.DefaultTaint.Key {
			out = append(out, t)
		}
	}
	return out
}

func tainted(n corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == kubernetes.DefaultTaint.Key {
			return true
		}
	}
	return false
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
