package kube

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/backend/kubernetes"
	"capblock/internal/client"
	"capblock/internal/kubetest"
)

// TestKubernetes runs capblock on a cluster as the operator and a team
// see it. 16 KWOK nodes of 8 GPUs in two zones; deploy/kubernetes's
// rights applied, and `capblock serve --backend kubernetes` run as its
// ServiceAccount, with those rights and nothing more, its webhooks
// registered from deploy/kubernetes; the CLI drives it, the cluster's API
// checks it:
//
//   - capblock discovers the 16 nodes;
//   - a 4-node block is bought; capblock, killed in the middle of its
//     activation (a webhook of the test holds two of the four labels),
//     completes it after a restart: its 4 nodes, and no other, carry
//     its label;
//   - `capblock jobs run` on it makes one Indexed Job whose 4 pods run
//     on those nodes, ranks 0 to 3;
//   - the team's own pod naming the block lands there; another team's
//     pod copying the toleration, or naming the block, is refused;
//   - a node of the block set NotReady is replaced: the block's status
//     names a new node, which gets the label, and the job runs again
//     on the new set;
//   - at the block's termination its pods are evicted; at its end no
//     node carries its label and no pod of it is left.
func TestKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds capblock and runs it on a Kubernetes control plane")
	}
	start := time.Now()
	c := startCluster(t) // first: without the binaries it skips, or fails under CI=true
	bin := buildBinary(t)
	ctx := t.Context()
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	kubeconfig := c.applyRights(t, dir)
	admissionAddr := freeAddr(t)
	c.registerWebhooks(t, admissionAddr, pki.caPEM)
	srv := newServer(t, bin, dir, "--sim-clock", "--rate-limit", "0", "--engine-poll", "1s",
		"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--kube-job-image", "trainer:1",
		"--admission-listen", admissionAddr, "--admission-tls-cert", pki.certFile, "--admission-tls-key", pki.keyFile)
	srv.start()
	t.Logf("cluster of 16 nodes and capblock ready in %v", time.Since(start).Round(time.Millisecond))

	// 1. The operator logs in: capblock sells the cluster's 16 nodes. The
	// team's namespace, and another team's, are labelled with their ids.
	op := newCLI(t, bin)
	var login struct{ User client.User }
	op.json(&login, "login", "--url", srv.url, "--token-file", filepath.Join(dir, "admin.token"))
	team := login.User.Team
	var inventory struct{ Nodes []client.Node }
	op.json(&inventory, "nodes")
	if diff := cmp.Diff(c.nodeNames(t), nodeNames(inventory.Nodes)); diff != "" {
		t.Fatalf("the nodes capblock sells (-cluster +capblock):\n%s", diff)
	}
	var other client.Team
	op.json(&other, "teams", "create", "other")
	alice := c.teamNamespace(t, "ml-research", team)
	bob := c.teamNamespace(t, "ml-other", other.ID)
	kubetest.Eventually(t, "capblock's webhooks are in force", func() (bool, error) {
		_, err := bob.CoreV1().Pods("ml-other").Create(ctx, userPod("probe", "").tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists}).pod,
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "tolerates every taint"), nil
	})

	// 2. A block of 4 nodes for 4 hours, from the next hour.
	var offerings struct{ Offerings []client.Offering }
	op.json(&offerings, "offerings", "--type", "h100.8x", "--count", "4", "--duration", "4h", "--start-after", "+1h", "--end-before", "+5h")
	if len(offerings.Offerings) == 0 {
		t.Fatal("no offering of 4 h100.8x for 4 hours")
	}
	var blk client.Block
	op.json(&blk, "buy", "1", "--name", "train")
	nodes := c.placed(t, op, blk.ID)
	key := kubernetes.DefaultBlockLabelDomain + "/" + blk.ID

	// 3. Its activation: capblock labels two nodes, hangs on the other
	// two, and is killed. The next start completes it.
	hold := c.holdLabels(t, pki, nodes[2:])
	op.run("admin", "clock", "--advance", "1h")
	hold.waitHeld(t, 2)
	kubetest.Eventually(t, "two of the block's nodes are labelled", func() (bool, error) { return len(c.labelled(t, key)) == 2, nil })
	srv.kill()
	hold.remove(t)
	if diff := cmp.Diff(labels(nodes[:2], team), c.labelled(t, key)); diff != "" {
		t.Fatalf("the nodes labelled when capblock was killed (-want +got):\n%s", diff)
	}
	srv.start()
	kubetest.Eventually(t, "the block's 4 nodes are labelled", func() (bool, error) { return cmp.Equal(labels(nodes, team), c.labelled(t, key)), nil })
	t.Logf("activation completed after a restart, at %v", time.Since(start).Round(time.Millisecond))

	// 4. A job of 4 instances on the block: one Indexed Job, a pod per
	// rank on the block's nodes.
	var job client.Job
	op.json(&job, "jobs", "run", "--block", blk.ID, "--name", "train", "--", "python", "train.py")
	pods := c.runningPods(t, "ml-research", job.ID+"/1", 4)
	if diff := cmp.Diff(nodes, podNodes(pods)); diff != "" {
		t.Errorf("the first run's nodes (-block +pods):\n%s", diff)
	}
	for i, p := range pods {
		rank := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		if rank != strconv.Itoa(i) || rankSource(p) != "metadata.annotations['"+batchv1.JobCompletionIndexAnnotation+"']" {
			t.Errorf("pod %s: completion index %q, RANK from %q; want %d, from the completion index", p.Name, rank, rankSource(p), i)
		}
	}
	jobs, err := c.admin.BatchV1().Jobs("ml-research").List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(jobs.Items) != 1 || *jobs.Items[0].Spec.CompletionMode != batchv1.IndexedCompletion || *jobs.Items[0].Spec.Completions != 4 {
		t.Errorf("Jobs of the run: %d, want one Indexed Job of 4 completions", len(jobs.Items))
	}
	op.json(&job, "jobs", "show", job.ID)
	if job.State != "running" {
		t.Errorf("jobs show: state %s, want running", job.State)
	}

	// 5. The team's own pod naming the block lands on its nodes; another
	// team's pods that copy the toleration, or name the block, are
	// refused.
	notebook, err := alice.CoreV1().Pods("ml-research").Create(ctx, userPod("notebook", blk.ID).pod, metav1.CreateOptions{})
	must(t, err)
	kubetest.Eventually(t, "the team's pod runs on the block's nodes", func() (bool, error) {
		notebook, err = alice.CoreV1().Pods("ml-research").Get(ctx, "notebook", metav1.GetOptions{})
		return err == nil && notebook.Status.Phase == corev1.PodRunning, err
	})
	if !slices.Contains(nodes, notebook.Spec.NodeName) {
		t.Errorf("the team's pod runs on %s, not a node of the block %v", notebook.Spec.NodeName, nodes)
	}
	sold := corev1.Toleration{Key: kubernetes.DefaultTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"copying the toleration": {userPod("copy", "").tolerate(sold).selectLabel(key, team).pod,
			"the pod tolerates capblock's taint capblock.io/sold=true:NoSchedule, but names no block"},
		"naming the block": {userPod("copy", blk.ID).tolerate(sold).pod,
			"block " + blk.ID + " is not held by team " + other.ID + ", the team of namespace ml-other"},
	} {
		if _, err := bob.CoreV1().Pods("ml-other").Create(ctx, tc.pod, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("another team's pod %s: %v; want a refusal saying %q", name, err, tc.want)
		}
	}

	// 6. A node of the block, not the notebook's, turns NotReady: the
	// block moves to a free node, and the job runs again on the new set.
	failed := pods[slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Spec.NodeName != notebook.Spec.NodeName })].Spec.NodeName
	c.setNotReady(t, failed)
	var moved []string
	kubetest.Eventually(t, "the block's status names a new node", func() (bool, error) {
		moved = c.placed(t, op, blk.ID)
		return !slices.Contains(moved, failed), nil
	})
	kubetest.Eventually(t, "the new node set is labelled", func() (bool, error) { return cmp.Equal(labels(moved, team), c.labelled(t, key)), nil })
	op.json(&inventory, "nodes")
	if i := slices.IndexFunc(inventory.Nodes, func(n client.Node) bool { return n.Name == failed }); i < 0 ||
		inventory.Nodes[i].Health != "unhealthy" || !strings.HasPrefix(inventory.Nodes[i].HealthReason, "NotReady since ") {
		t.Errorf("capblock nodes does not show %s unhealthy, NotReady since …: %+v", failed, inventory.Nodes)
	}
	again := c.runningPods(t, "ml-research", job.ID+"/2", 4)
	if diff := cmp.Diff(moved, podNodes(again)); diff != "" {
		t.Errorf("the second run's nodes (-block +pods):\n%s", diff)
	}
	t.Logf("node %s replaced, the job's second run running, at %v", failed, time.Since(start).Round(time.Millisecond))

	// 7. The block's termination, 30 minutes before its end, evicts its
	// pods: the job's and the team's own. Its nodes stay its own.
	op.run("admin", "clock", "--advance", "3h30m")
	kubetest.Eventually(t, "the block's pods are evicted", func() (bool, error) { return len(c.blockPods(t, blk.ID)) == 0, nil })
	op.json(&job, "jobs", "show", job.ID)
	if job.State != "interrupted" || job.Reason != "capacity_ended" {
		t.Errorf("jobs show after the termination: %s (%s), want interrupted (capacity_ended)", job.State, job.Reason)
	}
	if got := c.labelled(t, key); len(got) != 4 {
		t.Errorf("the nodes labelled while the block terminates: %v, want its 4", got)
	}

	// 8. Its end: no node carries its label, no pod of it is left.
	op.run("admin", "clock", "--advance", "30m")
	kubetest.Eventually(t, "the block's label is gone from every node", func() (bool, error) { return len(c.labelled(t, key)) == 0, nil })
	op.json(&blk, "blocks", "show", blk.ID)
	if blk.State != "expired" {
		t.Errorf("blocks show at the end: %s, want expired", blk.State)
	}
	if left := c.blockPods(t, blk.ID); len(left) != 0 {
		t.Errorf("pods of the block left at its end: %v", left)
	}
	t.Logf("the whole scenario in %v", time.Since(start).Round(time.Millisecond))
}

// placed returns the block's nodes as `capblock blocks status` shows
// them, sorted.
func (c *cluster) placed(t *testing.T, op *cli, block string) []string {
	t.Helper()
	var status client.BlockStatus
	op.json(&status, "blocks", "status", block)
	var out []string
	for _, p := range status.Placements {
		out = append(out, p.Node)
	}
	slices.Sort(out)
	return out
}

// labelled returns the nodes that carry key, with its value.
func (c *cluster) labelled(t *testing.T, key string) map[string]string {
	t.Helper()
	list, err := c.admin.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: key})
	must(t, err)
	out := map[string]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Labels[key]
	}
	return out
}

func labels(nodes []string, value string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		out[n] = value
	}
	return out
}

// nodeNames returns the cluster's nodes, sorted.
func (c *cluster) nodeNames(t *testing.T) []string {
	t.Helper()
	list, err := c.admin.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	must(t, err)
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

func nodeNames(nodes []client.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// runningPods waits until run has n pods in namespace, all Running, and
// returns them by completion index.
func (c *cluster) runningPods(t *testing.T, namespace, run string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	kubetest.Eventually(t, "the pods of run "+run+" run", func() (bool, error) {
		list, err := c.admin.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: kubernetes.JobLabel})
		if err != nil {
			return false, err
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Annotations[kubernetes.RunKeyAnnotation] != run })
		slices.SortFunc(pods, func(a, b corev1.Pod) int {
			return strings.Compare(a.Annotations[batchv1.JobCompletionIndexAnnotation], b.Annotations[batchv1.JobCompletionIndexAnnotation])
		})
		return len(pods) == n && !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning }), nil
	})
	return pods
}

// blockPods returns the pods that name the block, in every namespace,
// but those being deleted.
func (c *cluster) blockPods(t *testing.T, block string) []string {
	t.Helper()
	list, err := c.admin.CoreV1().Pods(corev1.NamespaceAll).List(t.Context(), metav1.ListOptions{LabelSelector: kubernetes.DefaultPodBlockLabel + "=" + block})
	must(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name+" ("+string(p.Status.Phase)+")")
	}
	return out
}

// podNodes are the pods' nodes, sorted.
func podNodes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	slices.Sort(out)
	return out
}

// rankSource is the field that the pod's RANK comes from.
func rankSource(p corev1.Pod) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "RANK" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// testPod builds a team's own pods.
type testPod struct{ pod *corev1.Pod }

// userPod is a team's pod that needs no GPU (a notebook beside the
// job), naming block if not empty.
func userPod(name, block string) testPod {
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "main", Image: "notebook:1"}}},
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

func (p testPod) selectLabel(key, value string) testPod {
	p.pod.Spec.NodeSelector = map[string]string{key: value}
	return p
}
