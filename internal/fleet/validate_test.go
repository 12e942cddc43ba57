package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// edit returns minimal with old replaced by new (old must occur).
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(minimal, old) {
		t.Fatalf("minimal has no %q", old)
	}
	return strings.Replace(minimal, old, new, 1)
}

const (
	typeLine  = `  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32"}`
	groupLine = `          - {prefix: a-h100-, count: 2, gpuModel: H100, gpus: 8}`
	where     = `zone "zone-a" rack "a-r1" node group "a-h100-"`
)

func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		yaml func(t *testing.T) string
		want []string
	}{
		// Decoding.
		"unknown top-level key": {
			yaml: func(*testing.T) string { return minimal + "bogus: 1\n" },
			want: []string{`line 10: unknown key "bogus"`},
		},
		"unknown key in a flow mapping": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2,", "count: 2, cnt: 3,") },
			want: []string{`line 9: unknown key "cnt"`},
		},
		"unknown limit": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  minDurations: 1h\n" },
			want: []string{`line 11: unknown key "minDurations"`},
		},
		"duplicate key": {
			yaml: func(*testing.T) string { return minimal + "currency: EUR\n" },
			want: []string{`line 10: mapping key "currency" already defined at [1:1]`},
		},
		"fractional count": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 1.5") },
			want: []string{`line 9: "1.5" is not a whole number`},
		},
		"quoted count": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", `count: "2"`) },
			want: []string{`line 9: "2" is not a whole number`},
		},
		"price as a mapping": {
			yaml: func(t *testing.T) string { return edit(t, `onDemandPrice: "98.32"`, `onDemandPrice: {usd: 1}`) },
			want: []string{`line 3: a mapping is not a decimal number`},
		},
		"name as a list": {
			yaml: func(t *testing.T) string { return edit(t, "name: zone-a", "name: [a, b]") },
			want: []string{`line 5: a list should be a string`},
		},
		"zones as a mapping": {
			yaml: func(*testing.T) string { return "currency: USD\nzones: {a: 1}\n" },
			want: []string{`line 2: mapping was used where sequence is expected`},
		},
		"overflow": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 99999999999999999999") },
			want: []string{`line 9: "99999999999999999999" is not a whole number`},
		},
		"bad indentation": {
			yaml: func(*testing.T) string { return "currency: USD\n  bad: indent\n" },
			want: []string{`line 1: mapping value is not allowed in this context`},
		},
		"two documents": {
			yaml: func(*testing.T) string { return minimal + "---\n" + minimal },
			want: []string{`line 1: the file holds 2 YAML documents; a fleet file is one document`},
		},

		// The whole file.
		"empty file": {
			yaml: func(*testing.T) string { return "" },
			want: []string{
				"currency is missing; add e.g. `currency: USD`",
				"no instance types; declare what is sold under instanceTypes",
				"no zones; declare nodes under zones[].racks[].nodeGroups[]",
			},
		},
		"lower-case currency": {
			yaml: func(t *testing.T) string { return edit(t, "currency: USD", "currency: usd") },
			want: []string{`line 1: currency "usd" is not a three-letter ISO 4217 code such as USD`},
		},
		"currency too long": {
			yaml: func(t *testing.T) string { return edit(t, "currency: USD", "currency: USDT") },
			want: []string{`line 1: currency "USDT" is not a three-letter ISO 4217 code such as USD`},
		},

		// Instance types.
		"type without name": {
			yaml: func(t *testing.T) string { return edit(t, "name: h100.8x, ", "") },
			want: []string{`line 3: instance type #1: name is missing`},
		},
		"type name with a space": {
			yaml: func(t *testing.T) string { return edit(t, "name: h100.8x", `name: "h100 8x"`) },
			want: []string{`line 3: instance type "h100 8x": name "h100 8x" may hold only letters, digits, '-', '_' and '.'`},
		},
		"duplicate type": {
			yaml: func(t *testing.T) string { return edit(t, typeLine, typeLine+"\n"+typeLine) },
			want: []string{`line 4: instance type "h100.8x": duplicate instance type name`},
		},
		"bad AWS name": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"}`, `"98.32", awsNames: ["p5 48xlarge"]}`) },
			want: []string{`line 3: instance type "h100.8x": awsNames[0] "p5 48xlarge" may hold only letters, digits, '-', '_' and '.'`},
		},
		"AWS name given twice": {
			yaml: func(t *testing.T) string {
				return edit(t, typeLine, `  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: "98.32", awsNames: [p5.48xlarge]}
  - {name: h100.4x, gpuModel: H100, gpusPerInstance: 4, onDemandPrice: "49.16", awsNames: [p5.48xlarge, h100.8x]}`)
			},
			want: []string{
				`line 4: instance type "h100.4x": AWS name "p5.48xlarge" is already given to instance type "h100.8x"`,
				`line 4: instance type "h100.4x": AWS name "h100.8x" is the name of another instance type`,
			},
		},
		"type without gpuModel": {
			yaml: func(t *testing.T) string { return edit(t, "gpuModel: H100, gpusPerInstance", "gpusPerInstance") },
			want: []string{
				`line 3: instance type "h100.8x": gpuModel is missing`,
				`line 9: ` + where + `: no instance type sells gpuModel "H100"; add one under instanceTypes or fix the model name`,
			},
		},
		"type without gpusPerInstance": {
			yaml: func(t *testing.T) string { return edit(t, "gpusPerInstance: 8, ", "") },
			want: []string{`line 3: instance type "h100.8x": gpusPerInstance is missing`},
		},
		"gpusPerInstance 0": {
			yaml: func(t *testing.T) string { return edit(t, "gpusPerInstance: 8", "gpusPerInstance: 0") },
			want: []string{`line 3: instance type "h100.8x": gpusPerInstance is 0, must be 1 to 64`},
		},
		"gpusPerInstance 65": {
			yaml: func(t *testing.T) string { return edit(t, "gpusPerInstance: 8", "gpusPerInstance: 65") },
			want: []string{`line 3: instance type "h100.8x": gpusPerInstance is 65, must be 1 to 64`},
		},
		"gpusPerInstance does not divide": {
			yaml: func(t *testing.T) string { return edit(t, "gpusPerInstance: 8", "gpusPerInstance: 3") },
			want: []string{`line 3: instance type "h100.8x": gpusPerInstance 3 does not divide the 8 GPUs of ` + where},
		},
		"type with no node of its model": {
			yaml: func(t *testing.T) string {
				return edit(t, typeLine, typeLine+"\n"+`  - {name: b200.8x, gpuModel: B200, gpusPerInstance: 8, onDemandPrice: "120"}`)
			},
			want: []string{`line 4: instance type "b200.8x": no node has gpuModel "B200"; add nodes of that model or fix the model name`},
		},
		"price missing": {
			yaml: func(t *testing.T) string { return edit(t, `, onDemandPrice: "98.32"`, "") },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice is missing; give the price of one instance-hour, e.g. "98.32"`},
		},
		"negative price": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"`, `"-98.32"`) },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice "-98.32" must be more than 0`},
		},
		"zero price": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"`, `0`) },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice "0" must be more than 0`},
		},
		"price with three decimals": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"`, `98.325`) },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice "98.325" has more than 2 decimals`},
		},
		"price with an exponent": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"`, `9.832e1`) },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice "9.832e1" not a decimal number (write it like 98.32)`},
		},
		"price with a currency": {
			yaml: func(t *testing.T) string { return edit(t, `"98.32"`, `"$98.32"`) },
			want: []string{`line 3: instance type "h100.8x": onDemandPrice "$98.32" not a decimal number (write it like 98.32)`},
		},

		// Zones and racks.
		"zone without name": {
			yaml: func(t *testing.T) string { return edit(t, "  - name: zone-a\n    racks:", "  - racks:") },
			want: []string{`line 5: zone #1: name is missing`},
		},
		"duplicate zone": {
			yaml: func(*testing.T) string {
				return minimal + "  - name: zone-a\n    racks:\n      - name: a-r2\n        nodeGroups:\n          - {prefix: b-, count: 1, gpuModel: H100, gpus: 8}\n"
			},
			want: []string{`line 10: zone "zone-a": duplicate zone name`},
		},
		"zone without racks": {
			yaml: func(*testing.T) string { return minimal + "  - name: zone-b\n" },
			want: []string{`line 10: zone "zone-b": no racks; declare them under racks`},
		},
		"rack without name": {
			yaml: func(t *testing.T) string {
				return edit(t, "      - name: a-r1\n        nodeGroups:", "      - nodeGroups:")
			},
			want: []string{`line 7: zone "zone-a" rack #1: name is missing`},
		},
		"rack name reused in another zone": {
			yaml: func(*testing.T) string {
				return minimal + "  - name: zone-b\n    racks:\n      - name: a-r1\n        nodeGroups:\n          - {prefix: b-, count: 1, gpuModel: H100, gpus: 8}\n"
			},
			want: []string{`line 12: zone "zone-b" rack "a-r1": duplicate rack name (also in zone "zone-a"); rack names are unique across the fleet`},
		},
		"rack without node groups": {
			yaml: func(t *testing.T) string {
				return edit(t, "        nodeGroups:\n"+groupLine+"\n", "        nodeGroups: []\n")
			},
			want: []string{
				`line 3: instance type "h100.8x": no node has gpuModel "H100"; add nodes of that model or fix the model name`,
				`line 7: zone "zone-a" rack "a-r1": no node groups; declare them under nodeGroups`,
			},
		},

		// Node groups.
		"name and prefix": {
			yaml: func(t *testing.T) string { return edit(t, "{prefix: a-h100-,", "{name: n1, prefix: a-h100-,") },
			want: []string{`line 9: zone "zone-a" rack "a-r1" node "n1": give either name (one node) or prefix with count, not both`},
		},
		"neither name nor prefix": {
			yaml: func(t *testing.T) string { return edit(t, "prefix: a-h100-, ", "") },
			want: []string{`line 9: zone "zone-a" rack "a-r1" node group #1: name or prefix is missing; give name for one node or prefix and count for several`},
		},
		"bad node name": {
			yaml: func(t *testing.T) string { return edit(t, "prefix: a-h100-, count: 2,", `name: "a/b",`) },
			want: []string{`line 9: zone "zone-a" rack "a-r1" node "a/b": name "a/b" may hold only letters, digits, '-', '_' and '.'`},
		},
		"count missing": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2, ", "") },
			want: []string{`line 9: ` + where + `: count is missing`},
		},
		"count 0": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 0") },
			want: []string{`line 9: ` + where + `: count is 0, must be 1 to 100000`},
		},
		"first negative": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 2, first: -1") },
			want: []string{`line 9: ` + where + `: first is -1, must be 0 or more`},
		},
		"digits too few": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 200, digits: 2") },
			want: []string{`line 9: ` + where + `: digits is 2, too few for the last index 200`},
		},
		"digits 10": {
			yaml: func(t *testing.T) string { return edit(t, "count: 2", "count: 2, digits: 10") },
			want: []string{`line 9: ` + where + `: digits is 10, must be 1 to 9`},
		},
		"gpus missing": {
			yaml: func(t *testing.T) string { return edit(t, ", gpus: 8", "") },
			want: []string{`line 9: ` + where + `: gpus is missing`},
		},
		"gpus 0": {
			yaml: func(t *testing.T) string { return edit(t, "gpus: 8", "gpus: 0") },
			want: []string{`line 9: ` + where + `: gpus is 0, must be 1 to 64`},
		},
		"gpus 65": {
			yaml: func(t *testing.T) string { return edit(t, "gpus: 8", "gpus: 65") },
			want: []string{`line 9: ` + where + `: gpus is 65, must be 1 to 64`},
		},
		"node gpuModel missing": {
			yaml: func(t *testing.T) string { return edit(t, ", gpuModel: H100, gpus: 8}", ", gpus: 8}") },
			want: []string{
				`line 3: instance type "h100.8x": no node has gpuModel "H100"; add nodes of that model or fix the model name`,
				`line 9: ` + where + `: gpuModel is missing`,
			},
		},
		"node model not sold": {
			yaml: func(*testing.T) string {
				return minimal + "          - {prefix: a-h200-, count: 2, gpuModel: H200, gpus: 8}\n"
			},
			want: []string{`line 10: zone "zone-a" rack "a-r1" node group "a-h200-": no instance type sells gpuModel "H200"; add one under instanceTypes or fix the model name`},
		},
		"overlapping node names": {
			yaml: func(*testing.T) string {
				return minimal + "          - {prefix: a-h100-, first: 2, count: 1, gpuModel: H100, gpus: 8}\n"
			},
			want: []string{`line 10: ` + where + `: node name "a-h100-02" is already declared by ` + where},
		},
		"many overlapping node names are one error": {
			yaml: func(*testing.T) string {
				return minimal + "          - {prefix: a-h100-, count: 3, gpuModel: H100, gpus: 8}\n"
			},
			want: []string{`line 10: ` + where + `: node name "a-h100-01" and 1 more are already declared by ` + where},
		},
		"empty label key": {
			yaml: func(t *testing.T) string { return edit(t, "gpus: 8}", `gpus: 8, labels: {"": x}}`) },
			want: []string{`line 9: ` + where + `: a label has an empty key`},
		},

		// Limits.
		"limits: bad duration": {
			yaml: func(*testing.T) string { return minimal + "limits: {offeringTTL: forever}\n" },
			want: []string{`line 10: limits: offeringTTL "forever" is not a duration; write it like 30m, 48h, 3d or 8w`},
		},
		"limits: duration without unit": {
			yaml: func(*testing.T) string { return minimal + "limits: {lockIn: 3600}\n" },
			want: []string{`line 10: limits: lockIn "3600" is not a duration; write it like 30m, 48h, 3d or 8w`},
		},
		"limits: maxInstancesPerBlock 0": {
			yaml: func(*testing.T) string { return minimal + "limits: {maxInstancesPerBlock: 0}\n" },
			want: []string{`line 10: limits: maxInstancesPerBlock is 0, must be 1 to 100000`},
		},
		"limits: minDuration not whole hours": {
			yaml: func(*testing.T) string { return minimal + "limits: {minDuration: 90m}\n" },
			want: []string{`line 10: limits: minDuration is 1h30m, must be a whole number of hours, at least 1h`},
		},
		"limits: minDuration under an hour": {
			yaml: func(*testing.T) string {
				return minimal + "limits: {minDuration: 0s, terminateBefore: 0s, warnBefore: 0s}\n"
			},
			want: []string{
				`line 10: limits: minDuration is 0s, must be a whole number of hours, at least 1h`,
				`line 10: limits: terminateBefore 0s leaves no time to run in a block of minDuration 0s`,
			},
		},
		"limits: maxDuration not whole hours": {
			yaml: func(*testing.T) string { return minimal + "limits: {maxDuration: 10h30m}\n" },
			want: []string{`line 10: limits: maxDuration is 10h30m, must be a whole number of hours`},
		},
		"limits: maxDuration under minDuration": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  minDuration: 2d\n  maxDuration: 1d\n" },
			want: []string{`line 12: limits: maxDuration 1d is shorter than minDuration 2d`},
		},
		"limits: minDuration over the default maxDuration": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  minDuration: 27w\n" },
			want: []string{
				`line 11: limits: maxDuration 26w is shorter than minDuration 27w`,
				`line 11: limits: horizon 26w is shorter than maxLeadTime 8w + minDuration 27w; the latest block must fit in it`,
			},
		},
		"limits: maxLeadTime under minLeadTime": {
			yaml: func(*testing.T) string { return minimal + "limits: {minLeadTime: 2h, maxLeadTime: 1h}\n" },
			want: []string{`line 10: limits: maxLeadTime 1h is shorter than minLeadTime 2h`},
		},
		"limits: horizon not whole hours": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  horizon: 30w30m\n" },
			want: []string{`line 11: limits: horizon is 30w30m, must be a whole number of hours`},
		},
		"limits: horizon under maxDuration": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  maxDuration: 30w\n" },
			want: []string{`line 11: limits: horizon 26w is shorter than maxDuration 30w; the longest block must fit in it`},
		},
		"limits: horizon under lead plus duration": {
			yaml: func(*testing.T) string { return minimal + "limits:\n  horizon: 4w\n  maxDuration: 1w\n" },
			want: []string{`line 11: limits: horizon 4w is shorter than maxLeadTime 8w + minDuration 1h; the latest block must fit in it`},
		},
		"limits: offeringTTL 0": {
			yaml: func(*testing.T) string { return minimal + "limits: {offeringTTL: 0s}\n" },
			want: []string{`line 10: limits: offeringTTL is 0s, must be more than 0 and at most 1d`},
		},
		"limits: offeringTTL 2d": {
			yaml: func(*testing.T) string { return minimal + "limits: {offeringTTL: 2d}\n" },
			want: []string{`line 10: limits: offeringTTL is 2d, must be more than 0 and at most 1d`},
		},
		"limits: lockIn over maxLeadTime": {
			yaml: func(*testing.T) string { return minimal + "limits: {lockIn: 9w}\n" },
			want: []string{`line 10: limits: lockIn 9w is longer than maxLeadTime 8w`},
		},
		"limits: terminateBefore over minDuration": {
			yaml: func(*testing.T) string { return minimal + "limits: {terminateBefore: 1h, warnBefore: 2h}\n" },
			want: []string{`line 10: limits: terminateBefore 1h leaves no time to run in a block of minDuration 1h`},
		},
		"limits: warnBefore after terminateBefore": {
			yaml: func(*testing.T) string { return minimal + "limits: {warnBefore: 10m}\n" },
			want: []string{`line 10: limits: warnBefore 10m comes after terminateBefore 30m; the warning must come first`},
		},
		"limits: extendFrom not over extendUntil": {
			yaml: func(*testing.T) string { return minimal + "limits: {extendFrom: 1h}\n" },
			want: []string{`line 10: limits: extendFrom 1h must be longer than extendUntil 1h`},
		},
		"limits: refunds out of range": {
			yaml: func(*testing.T) string {
				return minimal + "limits:\n  refundBeforeStartPercent: 101\n  refundAfterStartPercent: -1\n"
			},
			want: []string{
				`line 11: limits: refundBeforeStartPercent is 101, must be 0 to 100`,
				`line 12: limits: refundAfterStartPercent is -1, must be 0 to 100`,
			},
		},
		"limits: maxResults 0": {
			yaml: func(*testing.T) string { return minimal + "limits: {maxResults: 0}\n" },
			want: []string{`line 10: limits: maxResults is 0, must be 1 to 100`},
		},

		// Pricing.
		"pricing: floor above cap": {
			yaml: func(*testing.T) string { return minimal + "pricing: {floor: 0.9, cap: 0.8}\n" },
			want: []string{`line 10: pricing: floor 0.9 is above cap 0.8`},
		},
		"pricing: cap under the default floor": {
			yaml: func(*testing.T) string { return minimal + "pricing:\n  cap: 0.4\n" },
			want: []string{`line 11: pricing: floor 0.5 is above cap 0.4`},
		},
		"pricing: cap 0": {
			yaml: func(*testing.T) string { return minimal + "pricing: {floor: 0, cap: 0}\n" },
			want: []string{`line 10: pricing: cap is 0; blocks would be free`},
		},
		"pricing: five decimals": {
			yaml: func(*testing.T) string { return minimal + "pricing: {base: 0.12345}\n" },
			want: []string{`line 10: pricing: base "0.12345" has more than 4 decimals`},
		},
		"pricing: negative": {
			yaml: func(*testing.T) string { return minimal + "pricing: {utilization: -0.1}\n" },
			want: []string{`line 10: pricing: utilization is -0.1, must be 0 to 10 (a factor of the on-demand price)`},
		},
		"pricing: too large": {
			yaml: func(*testing.T) string { return minimal + "pricing: {cap: 11}\n" },
			want: []string{`line 10: pricing: cap is 11, must be 0 to 10 (a factor of the on-demand price)`},
		},
		"pricing: percent sign": {
			yaml: func(*testing.T) string { return minimal + "pricing: {leadDiscount: 20%}\n" },
			want: []string{`line 10: pricing: leadDiscount "20%" not a decimal number (write it like 98.32)`},
		},

		// Several problems at once, in file order.
		"every problem is reported": {
			yaml: func(t *testing.T) string {
				return strings.Replace(edit(t, "gpus: 8", "gpus: 65"), "currency: USD", "currency: usd", 1) + "limits: {maxResults: 0}\n"
			},
			want: []string{
				`line 1: currency "usd" is not a three-letter ISO 4217 code such as USD`,
				`line 9: ` + where + `: gpus is 65, must be 1 to 64`,
				`line 10: limits: maxResults is 0, must be 1 to 100`,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml(t)))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors %q", tc.want)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Parse error %T is not an ErrorList: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if len(list) != len(got) {
				t.Errorf("ErrorList has %d entries for %d lines; each error must be one line", len(list), len(got))
			}
		})
	}
}

func TestApprovalLimits(t *testing.T) {
	base := "currency: USD\ninstanceTypes:\n  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: \"98.32\"}\nzones:\n  - name: z\n    racks:\n      - name: r\n        nodeGroups:\n          - {prefix: n-, count: 2, gpuModel: H100, gpus: 8}\n"
	f, err := Parse([]byte(base + "limits: {approvalAboveInstances: 4, approvalDeadline: 10m}\n"))
	if err != nil || f.Limits.ApprovalAboveInstances != 4 || f.Limits.ApprovalDeadline != 10*time.Minute {
		t.Fatalf("Parse: %+v, %v", f.Limits, err)
	}
	for name, limits := range map[string]string{
		"negative":               "limits: {approvalAboveInstances: -1}\n",
		"deadline past the lead": "limits: {approvalAboveInstances: 4, approvalDeadline: 45m}\n",
	} {
		if _, err := Parse([]byte(base + limits)); err == nil || !strings.Contains(err.Error(), "approval") {
			t.Errorf("%s: %v, want an error about approval", name, err)
		}
	}
}

func TestHandOnLimits(t *testing.T) {
	base := "currency: USD\ninstanceTypes:\n  - {name: h100.8x, gpuModel: H100, gpusPerInstance: 8, onDemandPrice: \"98.32\"}\nzones:\n  - name: z\n    racks:\n      - name: r\n        nodeGroups:\n          - {prefix: n-, count: 2, gpuModel: H100, gpus: 8}\n"
	f, err := Parse([]byte(base))
	if err != nil || f.Limits.Transfers != "admin" || f.Limits.ResaleFeePercent != 10 {
		t.Fatalf("defaults: %q %d, %v; want admin and 10", f.Limits.Transfers, f.Limits.ResaleFeePercent, err)
	}
	f, err = Parse([]byte(base + "limits: {transfers: any, resaleFeePercent: 25}\n"))
	if err != nil || f.Limits.Transfers != "any" || f.Limits.ResaleFeePercent != 25 {
		t.Fatalf("Parse: %+v, %v", f.Limits, err)
	}
	for name, limits := range map[string]string{
		"unknown policy": "limits: {transfers: sometimes}\n",
		"fee over 100":   "limits: {resaleFeePercent: 101}\n",
	} {
		if _, err := Parse([]byte(base + limits)); err == nil || !(strings.Contains(err.Error(), "transfers") || strings.Contains(err.Error(), "resaleFeePercent")) {
			t.Errorf("%s: %v, want an error naming the key", name, err)
		}
	}
}
