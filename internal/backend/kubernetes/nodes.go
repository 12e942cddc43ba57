package kubernetes

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/core"
)

// nodeReader reads the inventory's view of a Node: pure, so that it is
// tested without a cluster.
type nodeReader struct {
	models     []ModelPattern
	sold       []string // the models sold; empty: all
	rackLabel  string
	nodeLabels []string
}

// read returns the inventory's node for n, or why n is not sold and
// whether that is worth an operator's notice (a GPU node left out is; a
// node without GPUs is not).
//
// Its GPUs are its nvidia.com/gpu capacity, not its allocatable: the
// device plugin takes a failed GPU out of the allocatable only, and a
// node with a failed GPU is one of 8 GPUs, unhealthy (health), rather
// than a node of 7 that no 8-GPU instance type fits.
func (r nodeReader) read(n *corev1.Node) (node core.Node, skip string, notable bool) {
	gpus := gpuCount(n)
	if gpus <= 0 {
		return core.Node{}, "no nvidia.com/gpu", false
	}
	product := n.Labels[GPUProductLabel]
	if product == "" {
		return core.Node{}, "no " + GPUProductLabel + " label", true
	}
	model := r.model(product)
	if model == "" {
		return core.Node{}, fmt.Sprintf("GPU product %q maps to no model", product), true
	}
	if len(r.sold) > 0 && !slices.Contains(r.sold, model) {
		return core.Node{}, fmt.Sprintf("no instance type sells GPU model %q (product %q)", model, product), true
	}
	zone := n.Labels[ZoneLabel]
	if zone == "" {
		return core.Node{}, "no " + ZoneLabel + " label", true
	}
	node = core.Node{Name: n.Name, Zone: zone, Rack: n.Labels[r.rackLabel], GPUModel: model, GPUs: int(gpus), Health: core.Healthy}
	for _, key := range r.nodeLabels {
		if v, ok := n.Labels[key]; ok {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[key] = v
		}
	}
	return node, "", false
}

// model maps a GPU product to the fleet's model: the first pattern that
// matches, else DefaultModel.
func (r nodeReader) model(product string) string {
	for _, p := range r.models {
		if ok, _ := path.Match(p.Glob, product); ok {
			return p.Model
		}
	}
	return DefaultModel(product)
}

// gpuCount is n's nvidia.com/gpu capacity, or its allocatable where a
// node reports no capacity.
func gpuCount(n *corev1.Node) int64 {
	if q, ok := n.Status.Capacity[GPUResource]; ok {
		return q.Value()
	}
	q := n.Status.Allocatable[GPUResource]
	return q.Value()
}

// unhealthyReason says why a sold node cannot serve its blocks, or "":
// not Ready (the kubelet stopped reporting, or reports a failure),
// cordoned (spec.unschedulable, an operator's drain), or GPUs that the
// device plugin no longer offers.
func unhealthyReason(n *corev1.Node) string {
	var why []string
	if ready := readyCondition(n); ready == nil {
		why = append(why, "NotReady: no Ready condition")
	} else if ready.Status != corev1.ConditionTrue {
		s := "NotReady since " + stamp(ready.LastTransitionTime)
		if ready.Reason != "" {
			s += " (" + ready.Reason + ")"
		}
		why = append(why, s)
	}
	if n.Spec.Unschedulable {
		why = append(why, "cordoned")
	}
	if c, ok := n.Status.Capacity[GPUResource]; ok {
		a := n.Status.Allocatable[GPUResource]
		if a.Value() < c.Value() {
			why = append(why, fmt.Sprintf("%d of %d GPUs allocatable", a.Value(), c.Value()))
		}
	}
	return strings.Join(why, "; ")
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func stamp(t metav1.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	return t.UTC().Format(time.RFC3339)
}

// hasTaint reports whether n carries a taint of t's key and effect with
// t's value.
func hasTaint(n *corev1.Node, t corev1.Taint) bool {
	for _, have := range n.Spec.Taints {
		if have.Key == t.Key && have.Effect == t.Effect && have.Value == t.Value {
			return true
		}
	}
	return false
}

// withTaint returns n's taints with t put in: a taint of the same key
// and effect (another value) is replaced.
func withTaint(taints []corev1.Taint, t corev1.Taint) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints)+1)
	for _, have := range taints {
		if have.Key != t.Key || have.Effect != t.Effect {
			out = append(out, have)
		}
	}
	return append(out, t)
}

// trimNode is the informer's transform: it keeps of a Node what the
// backend reads, so that a thousand nodes' images, addresses and managed
// fields are not held in memory.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a deletion's tombstone
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: versionAnnotations(n.Annotations), DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{
			Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Conditions: n.Status.Conditions,
		},
	}, nil
}

// versionAnnotations keeps, of a node's annotations, the versions of
// blocks that capblock recorded (converge.go): the only ones it reads.
func versionAnnotations(all map[string]string) map[string]string {
	var out map[string]string
	for k, v := range all {
		if strings.HasPrefix(k, "version.") && strings.Contains(k, "/") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
