package kubetest

import (
	"context"
	"errors"
	"os"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestCluster starts a cluster of 16 eight-GPU nodes in two zones, runs a
// pod on it, checks that RBAC is on, and then that no process is left once
// the cluster's test has ended.
func TestCluster(t *testing.T) {
	var groups []int
	t.Run("cluster", func(t *testing.T) {
		start := time.Now()
		c := Start(t, Options{})
		t.Logf("control plane ready in %v", time.Since(start).Round(time.Millisecond))
		for _, p := range c.procs.Procs() {
			groups = append(groups, p.Pid())
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		admin := kubernetes.NewForConfigOrDie(c.AdminConfig())

		t.Run("nodes", func(t *testing.T) {
			start := time.Now()
			for _, zone := range []string{"zone-a", "zone-b"} {
				if _, err := c.AddGPUNodes(ctx, 8, 8, zone, nil); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("16 nodes Ready in %v", time.Since(start).Round(time.Millisecond))
			nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelTopologyZone + "=zone-b"})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != 8 {
				t.Fatalf("zone-b has %d nodes, want 8", len(nodes.Items))
			}
			gpus := nodes.Items[0].Status.Allocatable[GPUResource]
			if gpus.Value() != 8 {
				t.Errorf("allocatable GPUs = %v, want 8", gpus.String())
			}
		})

		t.Run("pod", func(t *testing.T) {
			pod := gpuPod("train", 8, "zone-b")
			if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var got *corev1.Pod
			err := c.poll(ctx, "waiting for the pod to run", func() (bool, error) {
				var err error
				got, err = admin.CoreV1().Pods("default").Get(ctx, "train", metav1.GetOptions{})
				return err == nil && got.Status.Phase == corev1.PodRunning, err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("pod Running in %v on %s", time.Since(start).Round(time.Millisecond), got.Spec.NodeName)
			node, err := admin.CoreV1().Nodes().Get(ctx, got.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if zone := node.Labels[corev1.LabelTopologyZone]; zone != "zone-b" {
				t.Errorf("pod placed in %s, want zone-b", zone)
			}
		})

		t.Run("a pod wanting more GPUs than a node has is unschedulable", func(t *testing.T) {
			pod := gpuPod("too-big", 9, "zone-a")
			if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			err := c.poll(ctx, "waiting for the scheduler's verdict", func() (bool, error) {
				got, err := admin.CoreV1().Pods("default").Get(ctx, "too-big", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				for _, cond := range got.Status.Conditions {
					if cond.Type == corev1.PodScheduled {
						return cond.Reason == corev1.PodReasonUnschedulable, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})

		t.Run("RBAC refuses a ServiceAccount without a role", func(t *testing.T) {
			cfg, err := c.ServiceAccountConfig(ctx, "capblock-system", "capblock")
			if err != nil {
				t.Fatal(err)
			}
			sa := kubernetes.NewForConfigOrDie(cfg)
			_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if !apierrors.IsForbidden(err) {
				t.Fatalf("listing nodes as the ServiceAccount: err = %v, want Forbidden", err)
			}
		})
	})

	for _, pgid := range groups {
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still has processes after the cluster stopped (kill: %v)", pgid, err)
		}
	}
}

// gpuPod is a pod that asks for gpus GPUs in zone.
func gpuPod(name string, gpus int64, zone string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{
				corev1.LabelTopologyZone: zone,
				GPUProductLabel:          DefaultProduct,
			},
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "trainer:latest",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
				},
			}},
		},
	}
}

// TestVersionsMatchBuildScript keeps the cache folder that Start looks in
// the one that scripts/kube-cluster-build.sh builds.
func TestVersionsMatchBuildScript(t *testing.T) {
	script, err := os.ReadFile("../../scripts/kube-cluster-build.sh")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+_VERSION)=(\S+)$`).FindAllSubmatch(script, -1) {
		got[string(m[1])] = string(m[2])
	}
	want := map[string]string{"KUBE_VERSION": KubeVersion, "ETCD_VERSION": etcdVersion, "KWOK_VERSION": kwokVersion}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions in the build script (-want +got):\n%s", diff)
	}
	m := regexp.MustCompile(`(?m)^CACHE_KEY="(.*)"$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("no CACHE_KEY in the build script")
	}
	if key := os.Expand(string(m[1]), func(name string) string { return got[name] }); key != cacheKey() {
		t.Errorf("the build script's cache key is %s, Start looks in %s", key, cacheKey())
	}
}
