// Package kubenames holds the well-known names that capblock and a
// Kubernetes cluster share: the GPU resource and labels of NVIDIA's
// device plugin, and capblock's own taint and labels, with their
// defaults. The Kubernetes backend writes them and the admission webhooks
// read them; both import this package, which imports nothing of
// capblock's, so that the webhooks do not depend on the backend.
package kubenames

import corev1 "k8s.io/api/core/v1"

// The labels and resource that NVIDIA's device plugin and GPU feature
// discovery put on a GPU node, and Kubernetes' own zone label.
const (
	GPUResource     corev1.ResourceName = "nvidia.com/gpu"
	GPUProductLabel                     = "nvidia.com/gpu.product"
	ZoneLabel                           = corev1.LabelTopologyZone
)

// capblock's own names, the defaults of the backend's configuration.
const (
	// DefaultRackLabel is capblock's own: Kubernetes defines no rack
	// label, and the topology.kubernetes.io/ prefix is reserved to it (a
	// label invented there may clash with one it defines later).
	DefaultRackLabel = "capblock.io/rack"
	// DefaultBlockLabelDomain prefixes the label key that a block puts on
	// each of its nodes: block.capblock.io/<block id>=<team>.
	DefaultBlockLabelDomain = "block.capblock.io"
	// DefaultPodBlockLabel is the label by which a pod names the block it
	// runs for.
	DefaultPodBlockLabel = "capblock.io/block"
)

// DefaultTaint keeps from the nodes capblock sells every pod that does
// not tolerate it.
var DefaultTaint = corev1.Taint{Key: "capblock.io/sold", Value: "true", Effect: corev1.TaintEffectNoSchedule}
