package kubetest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The resource and label that NVIDIA's device plugin and GPU feature
// discovery put on a real GPU node.
const (
	GPUResource     corev1.ResourceName = "nvidia.com/gpu"
	GPUProductLabel                     = "nvidia.com/gpu.product"
	DefaultProduct                      = "NVIDIA-H100-80GB-HBM3"
)

// AddGPUNodes adds n fake nodes with gpus GPUs each in zone, named
// gpu-<zone>-<k>, and waits until they are Ready and schedulable. labels
// are added to the node's labels (the zone, the product, DefaultProduct
// unless labels name another, and the hostname); it returns the names.
func (c *Cluster) AddGPUNodes(ctx context.Context, n, gpus int, zone string, labels map[string]string) ([]string, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	c.mu.Lock()
	first := c.nodes
	c.nodes += n
	c.mu.Unlock()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("gpu-%s-%d", zone, first+i)
		node := gpuNode(names[i], gpus, zone, labels)
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating node %s: %w", names[i], err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = c.poll(ctx, "waiting for nodes to be Ready", func() (bool, error) {
		for _, name := range names {
			node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !schedulable(node) {
				return false, err
			}
		}
		return true, nil
	})
	return names, err
}

// RecreateGPUNode creates a GPU node named name again, as a cloud's
// auto-repair does after deleting it: the labels of AddGPUNodes and no
// others. It does not wait for it to be Ready.
func (c *Cluster) RecreateGPUNode(ctx context.Context, name string, gpus int, zone string, labels map[string]string) error {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("making a client: %w", err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, gpuNode(name, gpus, zone, labels), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return nil
}

// AddCPUNode adds a fake node without GPUs, named name, and returns its
// name. It does not wait for it to be Ready.
func (c *Cluster) AddCPUNode(ctx context.Context, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("making a client: %w", err)
	}
	node := gpuNode(name, 0, "zone-a", nil)
	delete(node.Labels, GPUProductLabel)
	delete(node.Status.Capacity, GPUResource)
	delete(node.Status.Allocatable, GPUResource)
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating node %s: %w", name, err)
	}
	return name, nil
}

// gpuNode is a node as KWOK needs it: annotated as fake, its capacity in
// its status (KWOK keeps what it finds there).
func gpuNode(name string, gpus int, zone string, labels map[string]string) *corev1.Node {
	all := map[string]string{
		corev1.LabelHostname:     name,
		corev1.LabelTopologyZone: zone,
		GPUProductLabel:          DefaultProduct,
	}
	maps.Copy(all, labels)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("192"),
		corev1.ResourceMemory: resource.MustParse("2Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
		GPUResource:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      all,
			Annotations: map[string]string{fakeNodeAnnotation: "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
}

// schedulable reports whether node is Ready and the node lifecycle
// controller has lifted its node.kubernetes.io/ taints.
func schedulable(node *corev1.Node) bool {
	for _, taint := range node.Spec.Taints {
		if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
			return false
		}
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ServiceAccountConfig returns a client configuration that authenticates
// as ServiceAccount namespace/name, creating both if missing, with a
// token from the TokenRequest API. It has only the rights that RBAC grants
// the ServiceAccount.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	hour := int64(3600)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return c.config(tok.Status.Token), nil
}
