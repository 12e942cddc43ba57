package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"capblock/internal/kubenames"
)

// The labels and resource that NVIDIA's device plugin and GPU feature
// discovery put on a GPU node, and Kubernetes' own zone label (package
// kubenames, which the admission webhooks share).
const (
	GPUResource     = kubenames.GPUResource
	GPUProductLabel = kubenames.GPUProductLabel
	ZoneLabel       = kubenames.ZoneLabel
)

// Defaults of Config.
const (
	// DefaultRackLabel: see kubenames.DefaultRackLabel.
	DefaultRackLabel = kubenames.DefaultRackLabel
	// DefaultBlockLabelDomain prefixes the label key that a block puts on
	// each of its nodes: block.capblock.io/<block id>=<team>.
	DefaultBlockLabelDomain = kubenames.DefaultBlockLabelDomain
	// DefaultPodBlockLabel is the label by which a pod names the block it
	// runs for.
	DefaultPodBlockLabel = kubenames.DefaultPodBlockLabel
	// DefaultResyncEvery is how often every node is compared with the
	// desired state, besides on its changes.
	DefaultResyncEvery = 30 * time.Second
	// DefaultParallel bounds the API calls that one action has in flight.
	DefaultParallel = 16
)

// DefaultTaint keeps from the nodes capblock sells every pod that does
// not tolerate it.
var DefaultTaint = kubenames.DefaultTaint

// Config is what the Kubernetes backend is built from; the zero value
// (with a Kubeconfig, or in a pod) takes every default.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the
	// in-cluster configuration (a pod's ServiceAccount).
	Kubeconfig string
	// REST, when set, is used instead of Kubeconfig (tests).
	REST *rest.Config
	// GPUModels map a node's nvidia.com/gpu.product to the fleet's GPU
	// model, the first matching pattern winning; a product that none
	// matches gets its model from the product's name (DefaultModel).
	GPUModels []ModelPattern
	// SoldModels, when set, are the GPU models that the fleet sells (its
	// instance types'): a node of another model is neither reported nor
	// tainted, so that capblock does not fence what it cannot sell.
	SoldModels []string
	// RackLabel is the node label that names its rack; a node without
	// it has an unknown rack. Default DefaultRackLabel.
	RackLabel string
	// NodeLabels are the node labels copied into the inventory's labels
	// (the fleet's free-form labels). Default: the GPU product label.
	NodeLabels []string
	// Taint is put on every node that the inventory reports. Default
	// DefaultTaint.
	Taint corev1.Taint
	// BlockLabelDomain is the prefix of the label that an active block
	// puts on its nodes. Default DefaultBlockLabelDomain.
	BlockLabelDomain string
	// PodBlockLabel is the pod label that names a pod's block: pods that
	// carry it are the block's, evicted at its termination and deleted
	// at its end. Default DefaultPodBlockLabel.
	PodBlockLabel string
	// Parallel bounds the API calls that one action has in flight.
	// Default DefaultParallel.
	Parallel int
	// SyncTimeout bounds New's wait for its first list of the nodes.
	// Default 60 s.
	SyncTimeout time.Duration
	// ResyncEvery is how often, while the leader hands it a desired
	// state, the backend compares every node with it, besides on every
	// change of a node. Default DefaultResyncEvery.
	ResyncEvery time.Duration
	// Now is the clock Terminate reads the block's end on; default
	// time.Now (actions follow the wall clock).
	Now func() time.Time
}

// ModelPattern maps the GPU products whose name matches Glob (path.Match
// syntax: "NVIDIA-H100*") to Model. An empty Model sells no node of
// those products.
type ModelPattern struct {
	Glob  string
	Model string
}

// ParseModelPattern reads "GLOB=MODEL", as --kube-gpu-model takes it.
func ParseModelPattern(s string) (ModelPattern, error) {
	glob, model, ok := strings.Cut(s, "=")
	if !ok || glob == "" {
		return ModelPattern{}, fmt.Errorf("%q: want PATTERN=MODEL, such as NVIDIA-H100*=H100", s)
	}
	if _, err := path.Match(glob, ""); err != nil {
		return ModelPattern{}, fmt.Errorf("%q: pattern %q: %w", s, glob, err)
	}
	if strings.Contains(model, "=") {
		return ModelPattern{}, fmt.Errorf("%q: a model name holds no '='", s)
	}
	return ModelPattern{Glob: glob, Model: model}, nil
}

// DefaultModel is the GPU model of a product that no pattern maps: its
// first word after the vendor's ("NVIDIA-H100-80GB-HBM3" → "H100",
// "NVIDIA-L40S" → "L40S", "Tesla-V100-SXM2-16GB" → "V100").
func DefaultModel(product string) string {
	words := strings.Split(product, "-")
	for len(words) > 1 && (strings.EqualFold(words[0], "NVIDIA") || strings.EqualFold(words[0], "Tesla")) {
		words = words[1:]
	}
	return words[0]
}

// withDefaults fills in what cfg leaves out and checks the rest.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.RackLabel == "" {
		cfg.RackLabel = DefaultRackLabel
	}
	if cfg.NodeLabels == nil {
		cfg.NodeLabels = []string{GPUProductLabel}
	}
	if cfg.Taint.Key == "" {
		cfg.Taint = DefaultTaint
	}
	if cfg.BlockLabelDomain == "" {
		cfg.BlockLabelDomain = DefaultBlockLabelDomain
	}
	if cfg.PodBlockLabel == "" {
		cfg.PodBlockLabel = DefaultPodBlockLabel
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.ResyncEvery <= 0 {
		cfg.ResyncEvery = DefaultResyncEvery
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var errs []error
	for _, key := range []string{cfg.RackLabel, cfg.Taint.Key, cfg.PodBlockLabel, cfg.BlockLabelDomain + "/x"} {
		for _, why := range validation.IsQualifiedName(key) {
			errs = append(errs, fmt.Errorf("label key %q: %s", key, why))
		}
	}
	for _, p := range cfg.GPUModels {
		if _, err := path.Match(p.Glob, ""); err != nil {
			errs = append(errs, fmt.Errorf("GPU model pattern %q: %w", p.Glob, err))
		}
	}
	return cfg, errors.Join(errs...)
}

// labelSafe returns s if it is a valid label value (and so a valid label
// name when not empty), else a value made from its hash: block ids and
// team names are capblock's, and a label may hold only 63 letters,
// digits, '-', '_' and '.'.
func labelSafe(s string) string {
	if s != "" && len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(sum[:12])
}

// PolicyRules are what the backend does on the cluster, for a
// ClusterRole of its ServiceAccount: it watches and patches nodes (the
// taint, the blocks' labels), lists and deletes the blocks' pods, and
// evicts them; and what capblock's jobs need (JobsPolicyRules).
func PolicyRules() []rbacv1.PolicyRule {
	return append([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}, JobsPolicyRules()...)
}
