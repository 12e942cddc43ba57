package slurm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"capblock/internal/core"
)

// Labels that the inventory gives a Slurm node, besides its rack and
// zone: its partitions, its features and its GPUs' GRES type, each
// comma-separated as Slurm prints them.
const (
	PartitionsLabel = "slurm.partitions"
	FeaturesLabel   = "slurm.features"
	GRESTypeLabel   = "slurm.gres-type"
)

// record is one object as `scontrol --oneliner show` prints it: its
// Key=Value fields.
type record map[string]string

// parseRecords reads scontrol's one-line output, one object a line.
//
// A field is a word that starts with Key= (a letter, then letters,
// digits, '_' or ':'); a word that does not continues the value before
// it, so that values with spaces (OS=Linux 6.1.0 #1 SMP …) read whole.
// Reason (a node's, free text an operator typed) is the last field
// scontrol prints and may hold anything: it takes the rest of the line.
func parseRecords(out string) []record {
	var recs []record
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		r := record{}
		if before, reason, ok := strings.Cut(" "+line, " Reason="); ok {
			r["Reason"] = strings.TrimSpace(reason)
			line = before
		}
		key := ""
		for _, word := range strings.Fields(line) {
			if k, v, ok := strings.Cut(word, "="); ok && isKey(k) {
				key = k
				r[key] = v
				continue
			}
			if key != "" {
				r[key] += " " + word
			}
		}
		recs = append(recs, r)
	}
	return recs
}

func isKey(s string) bool {
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		if !(ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_' || ch == ':') {
			return false
		}
	}
	return true
}

// list reads a comma-separated field; "(null)", "N/A" and "" are empty.
func (r record) list(key string) []string {
	v := r[key]
	if v == "" || v == "(null)" || v == "N/A" {
		return nil
	}
	return strings.Split(v, ",")
}

// gpuGRES is what a node's Gres field says of its GPUs.
type gpuGRES struct {
	types []string // distinct types, in order; "" for untyped GPUs
	count int
}

// parseGPUs reads the GPUs of a Gres field: "gpu:h100:8(S:0-1),nvme:1",
// "gpu:8", "gpu:a100:4,gpu:h100:4" (two types). Other GRES are ignored;
// a socket binding in parentheses, which may hold commas, is dropped.
func parseGPUs(gres string) (gpuGRES, error) {
	var g gpuGRES
	if gres == "" || gres == "(null)" {
		return g, nil
	}
	var items []string
	depth, from := 0, 0
	for i := range len(gres) {
		switch gres[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, gres[from:i])
				from = i + 1
			}
		}
	}
	items = append(items, gres[from:])
	for _, item := range items {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i]
		}
		parts := strings.Split(item, ":")
		if parts[0] != "gpu" || len(parts) < 2 {
			continue
		}
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil || n < 0 {
			return g, fmt.Errorf("GRES %q: count %q is not a number", item, parts[len(parts)-1])
		}
		typ := ""
		if len(parts) >= 3 {
			typ = parts[1]
		}
		if !slices.Contains(g.types, typ) {
			g.types = append(g.types, typ)
		}
		g.count += n
	}
	return g, nil
}

// nodeReader reads the inventory's view of a node record: pure, so that
// it is tested on recorded output.
type nodeReader struct {
	models      map[string]string
	sold        []string
	partitions  []string
	zone        string
	rackFeature string
	zoneFeature string
}

// read returns the inventory's node for r, or why it is not sold and
// whether that is worth an operator's notice (a GPU node left out is; a
// node without GPUs, or outside the sold partitions, is not).
func (nr nodeReader) read(r record) (node core.Node, skip string, notable bool) {
	name := r["NodeName"]
	gpus, err := parseGPUs(r["Gres"])
	switch {
	case err != nil:
		return core.Node{}, err.Error(), true
	case gpus.count == 0:
		return core.Node{}, "no GPU GRES", false
	case len(gpus.types) > 1:
		return core.Node{}, fmt.Sprintf("GPUs of several types (%s); a node sells one model", strings.Join(gpus.types, ", ")), true
	}
	partitions := r.list("Partitions")
	if len(nr.partitions) > 0 && !slices.ContainsFunc(partitions, func(p string) bool { return slices.Contains(nr.partitions, p) }) {
		return core.Node{}, "in no sold partition", false
	}
	typ := gpus.types[0]
	model, mapped := nr.models[typ]
	switch {
	case !mapped && typ == "":
		return core.Node{}, "untyped GPUs (gpu:N); map them with --slurm-gpu-model =MODEL", true
	case !mapped:
		model = DefaultModel(typ)
	}
	if model == "" {
		return core.Node{}, fmt.Sprintf("GRES type %q maps to no model", typ), true
	}
	if len(nr.sold) > 0 && !slices.Contains(nr.sold, model) {
		return core.Node{}, fmt.Sprintf("no instance type sells GPU model %q (GRES type %q)", model, typ), true
	}
	features := r.list("AvailableFeatures")
	node = core.Node{Name: name, Zone: nr.zone, GPUModel: model, GPUs: gpus.count, Health: core.Healthy, Labels: map[string]string{}}
	for _, f := range features {
		if v, ok := strings.CutPrefix(f, nr.rackFeature); ok && node.Rack == "" {
			node.Rack = v
		}
		if v, ok := strings.CutPrefix(f, nr.zoneFeature); ok && v != "" {
			node.Zone = v
		}
	}
	for key, v := range map[string]string{PartitionsLabel: strings.Join(partitions, ","), FeaturesLabel: strings.Join(features, ","), GRESTypeLabel: typ} {
		if v != "" {
			node.Labels[key] = v
		}
	}
	return node, "", false
}

// unhealthyStates are the parts of a node's State ("IDLE+DRAIN",
// "DOWN+NOT_RESPONDING", "MIXED+FAIL") that make it unhealthy: down,
// drained or draining, failed or failing, or with a configuration that
// Slurm found invalid. A node only not responding is not among them:
// Slurm sets it DOWN after SlurmdTimeout, and capblock follows that
// judgement rather than a missed ping.
var unhealthyStates = []string{"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "INVAL", "INVALID_REG", "ERROR"}

// unhealthyReason returns why a node record is unhealthy ("DOWN: test
// [root@2026-12-01T19:02:43]"), or "" for a healthy one.
func unhealthyReason(r record) string {
	state := r["State"]
	bad := false
	for _, part := range strings.Split(strings.TrimRight(state, "*~#!%$@^-"), "+") {
		if slices.Contains(unhealthyStates, part) {
			bad = true
		}
	}
	switch {
	case !bad:
		return ""
	case r["Reason"] != "":
		return state + ": " + r["Reason"]
	default:
		return state
	}
}
