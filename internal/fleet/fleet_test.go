package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

// minimal is the smallest valid fleet file; tests append to it or replace
// its lines.
const minimal = `currency: USD
instanceTypes:
  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}
zones:
  - name: zone-a
    racks:
      - name: a-r1
        nodeGroups:
          - {prefix: a-h100-, count: 2, gpuModel: H100, gpus: 8}
`

func usd(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }

func h100(name, zone, rack string, labels map[string]string) core.Node {
	return core.Node{Name: name, Zone: zone, Rack: rack, GPUModel: "H100", GPUs: 8, Labels: labels, Health: core.Healthy}
}

func TestParse(t *testing.T) {
	h100Type := core.InstanceType{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: usd(9832)}
	tests := map[string]struct {
		yaml string
		want core.Fleet
	}{
		"minimal takes default limits and pricing": {
			yaml: minimal,
			want: core.Fleet{
				Currency: "USD",
				Types:    []core.InstanceType{h100Type},
				Nodes: []core.Node{
					h100("a-h100-01", "zone-a", "a-r1", nil),
					h100("a-h100-02", "zone-a", "a-r1", nil),
				},
				Limits:  core.DefaultLimits(),
				Pricing: core.DefaultPricing(),
			},
		},
		"limits and pricing override key by key": {
			yaml: minimal + `limits:
  maxInstancesPerBlock: 8
  maxDuration: 14d
  minLeadTime: 0s
  refundAfterStartPercent: 50
  maxResults: 3
  backfillNotice: 5m
  lendCreditPercent: 70
pricing: {floor: 0.6, leadDiscount: "0.125", cap: 1, spotFactor: 0.25}
`,
			want: core.Fleet{
				Currency: "USD",
				Types:    []core.InstanceType{h100Type},
				Nodes: []core.Node{
					h100("a-h100-01", "zone-a", "a-r1", nil),
					h100("a-h100-02", "zone-a", "a-r1", nil),
				},
				Limits: func() core.Limits {
					l := core.DefaultLimits()
					l.MaxInstancesPerBlock = 8
					l.MaxDuration = 14 * 24 * time.Hour
					l.MinLeadTime = 0
					l.RefundAfterStart = 50
					l.MaxResults = 3
					l.BackfillNotice = 5 * time.Minute
					l.LendCreditPercent = 70
					return l
				}(),
				Pricing: core.Pricing{FloorBP: 6000, CapBP: 10000, BaseBP: 7500, UtilizationBP: 4000, LeadDiscountBP: 1250, SpotBP: 2500},
			},
		},
		"node groups: first, digits, single names, labels, several zones": {
			yaml: `currency: EUR
instanceTypes:
  - name: l4.1x
    gpuModel: L4
    gpusPerInstance: 1
    onDemandPrice: 0.70
  - {name: l4.2x, gpuModel: L4, gpusPerInstance: 2, onDemandPrice: "1.4"}
zones:
  - name: z1
    racks:
      - name: r1
        nodeGroups:
          - {prefix: gpu-, first: 9, count: 2, gpuModel: L4, gpus: 4, labels: {fabric: eth, tier: a}}
          - {prefix: x, first: 0, count: 1, digits: 3, gpuModel: L4, gpus: 2}
  - name: z2
    racks:
      - name: r2
        nodeGroups:
          - {name: special, gpuModel: L4, gpus: 4}
`,
			want: core.Fleet{
				Currency: "EUR",
				Types: []core.InstanceType{
					{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: core.Money{Minor: 70, Currency: "EUR"}},
					{Name: "l4.2x", GPUModel: "L4", GPUsPerInstance: 2, OnDemand: core.Money{Minor: 140, Currency: "EUR"}},
				},
				Nodes: []core.Node{
					{Name: "gpu-09", Zone: "z1", Rack: "r1", GPUModel: "L4", GPUs: 4, Labels: map[string]string{"fabric": "eth", "tier": "a"}, Health: core.Healthy},
					{Name: "gpu-10", Zone: "z1", Rack: "r1", GPUModel: "L4", GPUs: 4, Labels: map[string]string{"fabric": "eth", "tier": "a"}, Health: core.Healthy},
					{Name: "x000", Zone: "z1", Rack: "r1", GPUModel: "L4", GPUs: 2, Health: core.Healthy},
					{Name: "special", Zone: "z2", Rack: "r2", GPUModel: "L4", GPUs: 4, Health: core.Healthy},
				},
				Limits:  core.DefaultLimits(),
				Pricing: core.DefaultPricing(),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseLabelsAreNotShared(t *testing.T) {
	f, err := Parse([]byte(strings.Replace(minimal, "gpus: 8}", "gpus: 8, labels: {fabric: ib}}", 1)))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	f.Nodes[0].Labels["fabric"] = "changed"
	if got := f.Nodes[1].Labels["fabric"]; got != "ib" {
		t.Errorf("changing one node's labels changed another's: fabric = %q", got)
	}
}

func TestDemo(t *testing.T) {
	f := Demo()
	gpuNodes := map[string]int{}
	names := map[string]bool{}
	for _, n := range f.Nodes {
		gpuNodes[n.GPUModel]++
		if names[n.Name] {
			t.Errorf("node name %q appears twice", n.Name)
		}
		names[n.Name] = true
		if n.Health != core.Healthy {
			t.Errorf("node %s health = %q, want healthy", n.Name, n.Health)
		}
	}
	if diff := cmp.Diff(map[string]int{"H100": 64, "A100": 32, "L4": 32}, gpuNodes); diff != "" {
		t.Errorf("nodes per GPU model (-want +got):\n%s", diff)
	}
	wantTypes := []core.InstanceType{
		{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: usd(9832), AWSNames: []string{"p5.48xlarge", "ml.p5.48xlarge"}},
		{Name: "a100.8x", GPUModel: "A100", GPUsPerInstance: 8, OnDemand: usd(4096), AWSNames: []string{"p4d.24xlarge", "ml.p4d.24xlarge"}},
		{Name: "l4.4x", GPUModel: "L4", GPUsPerInstance: 4, OnDemand: usd(400), AWSNames: []string{"g6.12xlarge"}},
		{Name: "l4.1x", GPUModel: "L4", GPUsPerInstance: 1, OnDemand: usd(100), AWSNames: []string{"g6.xlarge"}},
	}
	if diff := cmp.Diff(wantTypes, f.Types); diff != "" {
		t.Errorf("demo types (-want +got):\n%s", diff)
	}
	for _, model := range []string{"H100", "A100", "L4"} {
		if diff := cmp.Diff([]string{"zone-a", "zone-b"}, f.Zones(model)); diff != "" {
			t.Errorf("zones of %s (-want +got):\n%s", model, diff)
		}
	}
	racks := map[string]bool{}
	for _, n := range f.Nodes {
		racks[n.Rack] = true
	}
	if len(racks) < 4 {
		t.Errorf("demo has %d racks, want several per zone", len(racks))
	}
	if diff := cmp.Diff(core.DefaultLimits(), f.Limits); diff != "" {
		t.Errorf("demo limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(core.DefaultPricing(), f.Pricing); diff != "" {
		t.Errorf("demo pricing (-want +got):\n%s", diff)
	}
}

func TestExampleFile(t *testing.T) {
	f, err := Load("../../examples/fleet.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if diff := cmp.Diff(core.DefaultLimits(), f.Limits); diff != "" {
		t.Errorf("the example's limits should spell out the defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(core.DefaultPricing(), f.Pricing); diff != "" {
		t.Errorf("the example's pricing should spell out the defaults (-want +got):\n%s", diff)
	}
	var names []string
	for _, n := range f.Nodes {
		if strings.HasPrefix(n.Name, "a-") {
			names = append(names, n.Name)
		}
	}
	want := []string{
		"a-h100-01", "a-h100-02", "a-h100-03", "a-h100-04", "a-h100-05", "a-h100-06", "a-h100-07", "a-h100-08",
		"a-h100-09", "a-h100-10", "a-h100-11", "a-h100-12", "a-h100-13", "a-h100-14", "a-h100-15", "a-h100-16",
		"a-l4-special",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("zone-a node names (-want +got):\n%s", diff)
	}
	if got, want := len(f.Nodes), 8+8+1+12; got != want {
		t.Errorf("example has %d nodes, want %d", got, want)
	}
	if got, want := f.Nodes[len(f.Nodes)-1].Name, "b-l4-012"; got != want {
		t.Errorf("last node = %q, want %q", got, want)
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(minimal+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := path + `:10: unknown key "bogus"`
	if err == nil || err.Error() != want {
		t.Fatalf("Load error = %v, want %q", err, want)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Line != 10 || fe.File != path {
		t.Errorf("errors.As(*Error) = %+v, want line 10 of %s", fe, path)
	}

	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want an error wrapping os.ErrNotExist", err)
	}
}
