package kubernetes

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"capblock/internal/core"
)

// nodeFixture builds a Node as a GPU node reports it: Ready, with
// capacity and allocatable of gpus GPUs and the zone and product labels.
type nodeFixture struct{ n *corev1.Node }

func makeNode(name string, gpus int64) *nodeFixture {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &nodeFixture{&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			ZoneLabel: "zone-a", GPUProductLabel: "NVIDIA-H100-80GB-HBM3", corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{GPUResource: q, corev1.ResourceCPU: resource.MustParse("96")},
			Allocatable: corev1.ResourceList{GPUResource: q.DeepCopy(), corev1.ResourceCPU: resource.MustParse("96")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

func (f *nodeFixture) label(k, v string) *nodeFixture {
	if v == "" {
		delete(f.n.Labels, k)
	} else {
		f.n.Labels[k] = v
	}
	return f
}

func (f *nodeFixture) allocatable(gpus int64) *nodeFixture {
	f.n.Status.Allocatable[GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	return f
}

func (f *nodeFixture) noGPUs() *nodeFixture {
	delete(f.n.Status.Capacity, GPUResource)
	delete(f.n.Status.Allocatable, GPUResource)
	return f
}

func (f *nodeFixture) ready(s corev1.ConditionStatus, reason string, since time.Time) *nodeFixture {
	f.n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s, Reason: reason, LastTransitionTime: metav1.NewTime(since)}}
	return f
}

func (f *nodeFixture) cordoned() *nodeFixture {
	f.n.Spec.Unschedulable = true
	return f
}

func (f *nodeFixture) obj() *corev1.Node { return f.n }

func TestRead(t *testing.T) {
	r := nodeReader{
		models:     []ModelPattern{{"NVIDIA-H100*", "H100"}, {"NVIDIA-A100-PCIE*", ""}, {"*A100*", "A100"}},
		sold:       []string{"H100", "A100", "L40S"},
		rackLabel:  DefaultRackLabel,
		nodeLabels: []string{GPUProductLabel},
	}
	h100 := map[string]string{GPUProductLabel: "NVIDIA-H100-80GB-HBM3"}
	tests := map[string]struct {
		node        *corev1.Node
		want        core.Node
		wantSkip    string
		wantNotable bool
	}{
		"a GPU node with its rack": {
			node: makeNode("n1", 8).label(DefaultRackLabel, "r7").obj(),
			want: core.Node{Name: "n1", Zone: "zone-a", Rack: "r7", GPUModel: "H100", GPUs: 8, Health: core.Healthy, Labels: h100},
		},
		"no rack label: the rack is unknown": {
			node: makeNode("n1", 8).obj(),
			want: core.Node{Name: "n1", Zone: "zone-a", GPUModel: "H100", GPUs: 8, Health: core.Healthy, Labels: h100},
		},
		"a GPU short in the allocatable: still 8 GPUs": {
			node: makeNode("n1", 8).allocatable(7).obj(),
			want: core.Node{Name: "n1", Zone: "zone-a", GPUModel: "H100", GPUs: 8, Health: core.Healthy, Labels: h100},
		},
		"the first pattern that matches": {
			node: makeNode("n1", 8).label(GPUProductLabel, "NVIDIA-A100-SXM4-80GB").obj(),
			want: core.Node{Name: "n1", Zone: "zone-a", GPUModel: "A100", GPUs: 8, Health: core.Healthy,
				Labels: map[string]string{GPUProductLabel: "NVIDIA-A100-SXM4-80GB"}},
		},
		"no pattern matches: the product's first word": {
			node: makeNode("n1", 4).label(GPUProductLabel, "NVIDIA-L40S").obj(),
			want: core.Node{Name: "n1", Zone: "zone-a", GPUModel: "L40S", GPUs: 4, Health: core.Healthy,
				Labels: map[string]string{GPUProductLabel: "NVIDIA-L40S"}},
		},
		"a pattern to no model": {
			node:     makeNode("n1", 8).label(GPUProductLabel, "NVIDIA-A100-PCIE-40GB").obj(),
			wantSkip: `GPU product "NVIDIA-A100-PCIE-40GB" maps to no model`, wantNotable: true,
		},
		"a model that no instance type sells": {
			node:     makeNode("n1", 8).label(GPUProductLabel, "NVIDIA-B200").obj(),
			wantSkip: `no instance type sells GPU model "B200" (product "NVIDIA-B200")`, wantNotable: true,
		},
		"no GPUs": {
			node:     makeNode("cpu", 0).noGPUs().obj(),
			wantSkip: "no nvidia.com/gpu",
		},
		"no product label": {
			node:     makeNode("n1", 8).label(GPUProductLabel, "").obj(),
			wantSkip: "no nvidia.com/gpu.product label", wantNotable: true,
		},
		"no zone label": {
			node:     makeNode("n1", 8).label(ZoneLabel, "").obj(),
			wantSkip: "no topology.kubernetes.io/zone label", wantNotable: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, skip, notable := r.read(tc.node)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			if skip != tc.wantSkip || notable != tc.wantNotable {
				t.Errorf("skip = %q, %v; want %q, %v", skip, notable, tc.wantSkip, tc.wantNotable)
			}
		})
	}
}

func TestUnhealthyReason(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 3, 0, 0, time.UTC)
	tests := map[string]struct {
		node *corev1.Node
		want string
	}{
		"Ready":             {makeNode("n", 8).obj(), ""},
		"NotReady":          {makeNode("n", 8).ready(corev1.ConditionFalse, "KubeletNotReady", since).obj(), "NotReady since 2026-12-01T12:03:00Z (KubeletNotReady)"},
		"unknown":           {makeNode("n", 8).ready(corev1.ConditionUnknown, "NodeStatusUnknown", since).obj(), "NotReady since 2026-12-01T12:03:00Z (NodeStatusUnknown)"},
		"cordoned":          {makeNode("n", 8).cordoned().obj(), "cordoned"},
		"a GPU lost":        {makeNode("n", 8).allocatable(7).obj(), "7 of 8 GPUs allocatable"},
		"all of it at once": {makeNode("n", 8).ready(corev1.ConditionFalse, "", since).cordoned().allocatable(0).obj(), "NotReady since 2026-12-01T12:03:00Z; cordoned; 0 of 8 GPUs allocatable"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := unhealthyReason(tc.node); got != tc.want {
				t.Errorf("unhealthyReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseModelPattern(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    ModelPattern
		wantErr bool
	}{
		"glob":             {in: "NVIDIA-H100*=H100", want: ModelPattern{"NVIDIA-H100*", "H100"}},
		"no model: unsold": {in: "NVIDIA-A100-PCIE*=", want: ModelPattern{"NVIDIA-A100-PCIE*", ""}},
		"no '='":           {in: "NVIDIA-H100*", wantErr: true},
		"no pattern":       {in: "=H100", wantErr: true},
		"a bad pattern":    {in: "NVIDIA-[H100=H100", wantErr: true},
		"two '='":          {in: "a=b=c", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModelPattern(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseModelPattern(%q) error = %v, want an error: %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pattern (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultModel(t *testing.T) {
	for product, want := range map[string]string{
		"NVIDIA-H100-80GB-HBM3": "H100", "NVIDIA-A100-SXM4-80GB": "A100", "NVIDIA-L4": "L4",
		"NVIDIA-L40S": "L40S", "Tesla-V100-SXM2-16GB": "V100", "NVIDIA-H200": "H200", "H100": "H100",
	} {
		if got := DefaultModel(product); got != want {
			t.Errorf("DefaultModel(%q) = %q, want %q", product, got, want)
		}
	}
}

func TestLabelSafe(t *testing.T) {
	if got := labelSafe("cb-0123456789abcdef0"); got != "cb-0123456789abcdef0" {
		t.Errorf("a valid id changed: %q", got)
	}
	a, b := labelSafe("cb-a block's life"), labelSafe("cb-a block's life!")
	if a == b || len(a) > 63 {
		t.Errorf("unsafe ids map to %q and %q: want distinct label values", a, b)
	}
	if got := labelSafe(""); got == "" {
		t.Error("an empty id maps to an empty label name")
	}
}

func TestWithTaint(t *testing.T) {
	sold := DefaultTaint
	other := corev1.Taint{Key: "gpu-health", Effect: corev1.TaintEffectNoExecute}
	old := corev1.Taint{Key: sold.Key, Value: "false", Effect: sold.Effect}
	got := withTaint([]corev1.Taint{other, old}, sold)
	if diff := cmp.Diff([]corev1.Taint{other, sold}, got); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}
