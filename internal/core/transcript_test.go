package core

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata transcripts with the current output")

// TestTranscripts runs the golden transcripts in testdata. Each case is a
// command, a "----" line and the expected output, separated by blank
// lines. Run with -update to rewrite the expectations, then review the
// diff as text.
func TestTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			h := newHarness()
			var out strings.Builder
			for i, c := range parseCases(string(data)) {
				got := h.run(t, c.cmd)
				if !*update && got != c.want {
					t.Errorf("%s case %d: %s\ngot:\n%s\nwant:\n%s", file, i+1, c.cmd, got, c.want)
				}
				fmt.Fprintf(&out, "%s\n----\n%s\n", c.cmd, got)
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

type tcase struct{ cmd, want string }

func parseCases(s string) []tcase {
	var cases []tcase
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" || strings.HasPrefix(lines[i], "#") {
			continue
		}
		c := tcase{cmd: lines[i]}
		i++ // the ---- line
		var want []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		if len(want) > 0 {
			c.want += "\n"
		}
		cases = append(cases, c)
	}
	return cases
}

// harness is a fleet, an index and a clock driven by transcript commands.
type harness struct {
	fleet Fleet
	ix    *Index
	now   time.Time
	start time.Time
}

func newHarness() *harness {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return &harness{fleet: Fleet{Currency: "USD", Limits: DefaultLimits(), Pricing: DefaultPricing()}, now: now, start: now}
}

func (h *harness) run(t *testing.T, cmd string) string {
	t.Helper()
	fields := strings.Fields(cmd)
	args := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	switch fields[0] {
	case "add-nodes":
		// add-nodes zone=z rack=r model=H100 gpus=8 count=4
		for range atoi(t, args["count"]) {
			h.fleet.Nodes = append(h.fleet.Nodes, Node{
				Name: fmt.Sprintf("%s-%02d", args["rack"], h.countRack(args["rack"])),
				Zone: args["zone"], Rack: args["rack"], GPUModel: args["model"], GPUs: atoi(t, args["gpus"]), Health: Healthy,
			})
		}
		return h.rebuild(t)
	case "add-type":
		// add-type name=h100.8x model=H100 gpus=8 price=9832
		h.fleet.Types = append(h.fleet.Types, InstanceType{Name: args["name"], GPUModel: args["model"],
			GPUsPerInstance: atoi(t, args["gpus"]), OnDemand: Money{Minor: int64(atoi(t, args["price"])), Currency: "USD"}})
		return h.rebuild(t)
	case "reserve":
		return h.reserve(t, args)
	case "extend":
		return h.extend(t, args)
	case "cancel":
		b, _ := h.ix.Block(args["id"])
		c := *b
		c.State = StateCancelled
		h.ix.Add(c)
		return "ok\n"
	case "advance":
		d, err := time.ParseDuration(args["by"])
		if err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(d)
		return "now " + h.rel(h.now) + "\n"
	case "fail":
		// fail node=N: mark it failed and replace it in the blocks on it.
		h.ix.SetHealth(args["node"], Unhealthy)
		var out strings.Builder
		for _, b := range h.ix.BlocksOn(args["node"], h.now) {
			pls, err := h.ix.PlaceReplacement(b, args["node"])
			if err != nil {
				fmt.Fprintf(&out, "%s degraded: %v\n", b.ID, err)
				continue
			}
			b.Placements = pls
			h.ix.Add(b)
			fmt.Fprintf(&out, "%s now on %s\n", b.ID, placementString(pls))
		}
		if out.Len() == 0 {
			return "ok\n"
		}
		return out.String()
	case "search":
		return h.search(t, args)
	case "search-plan":
		return h.searchPlan(t, args)
	case "print-timeline":
		return h.timeline(atoi(t, args["hours"]))
	}
	t.Fatalf("unknown command %q", fields[0])
	return ""
}

func (h *harness) countRack(rack string) int {
	n := 0
	for _, node := range h.fleet.Nodes {
		if node.Rack == rack {
			n++
		}
	}
	return n
}

func (h *harness) rebuild(t *testing.T) string {
	var blocks []Block
	if h.ix != nil {
		for _, b := range h.ix.Blocks() {
			blocks = append(blocks, *b)
		}
	}
	ix, err := NewIndex(&h.fleet, blocks, h.start)
	if err != nil {
		t.Fatal(err)
	}
	h.ix = ix
	return fmt.Sprintf("%d nodes, %d types\n", len(h.fleet.Nodes), len(h.fleet.Types))
}

func (h *harness) reserve(t *testing.T, args map[string]string) string {
	typ, _ := h.fleet.Type(args["type"])
	start := h.now.Add(time.Duration(atoi(t, strings.TrimPrefix(args["start"], "+"))) * time.Hour)
	end := start.Add(time.Duration(atoi(t, args["hours"])) * time.Hour)
	plan, err := h.ix.Place(PlaceRequest{Type: typ, Count: atoi(t, args["count"]), Zone: args["zone"], Start: start, End: end}, h.now)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var out strings.Builder
	for _, m := range plan.Moves {
		h.ix.Add(m)
		fmt.Fprintf(&out, "moved %s to %s\n", m.ID, placementString(m.Placements))
	}
	b := Block{ID: args["id"], Team: args["team"], InstanceType: typ.Name, GPUModel: typ.GPUModel, Count: atoi(t, args["count"]), Zone: args["zone"],
		Start: start, End: end, State: StateScheduled, Placements: plan.Placements}
	if err := h.ix.Add(b); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "%s %s..%s on %s\n", b.ID, h.rel(start), h.rel(end), placementString(plan.Placements))
	return out.String()
}

func (h *harness) extend(t *testing.T, args map[string]string) string {
	b, ok := h.ix.Block(args["id"])
	if !ok {
		t.Fatalf("no block %s", args["id"])
	}
	newEnd := b.End.Add(time.Duration(atoi(t, args["hours"])) * time.Hour)
	plan, err := h.ix.PlaceExtension(*b, newEnd, h.now)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var out strings.Builder
	for _, m := range plan.Moves {
		h.ix.Add(m)
		fmt.Fprintf(&out, "moved %s to %s\n", m.ID, placementString(m.Placements))
	}
	ext := *b
	ext.End, ext.Placements = newEnd, plan.Placements
	h.ix.Add(ext)
	fmt.Fprintf(&out, "%s now ends %s on %s\n", ext.ID, h.rel(newEnd), placementString(ext.Placements))
	return out.String()
}

func (h *harness) search(t *testing.T, args map[string]string) string {
	req := SearchRequest{Types: strings.Split(args["types"], ","), Count: atoi(t, args["count"]), Zone: args["zone"],
		StartAfter: h.now.Add(time.Duration(atoi(t, strings.TrimPrefix(args["after"], "+"))) * time.Hour),
		EndBefore:  h.now.Add(time.Duration(atoi(t, strings.TrimPrefix(args["before"], "+"))) * time.Hour)}
	if v, ok := args["hours"]; ok {
		req.Duration = time.Duration(atoi(t, v)) * time.Hour
	}
	if v, ok := args["min"]; ok {
		req.MinDuration = time.Duration(atoi(t, v)) * time.Hour
		req.MaxDuration = time.Duration(atoi(t, args["max"])) * time.Hour
	}
	if v, ok := args["max-results"]; ok {
		req.MaxResults = atoi(t, v)
	}
	if team, ok := args["team"]; ok {
		req.Team, req.Quotas = team, map[string]Quota{}
		for _, name := range req.Types {
			req.Quotas[name] = h.quota(t, team, args)
		}
	}
	offers, err := h.ix.Search(req, h.now)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	if len(offers) == 0 {
		return "no offerings\n"
	}
	var out strings.Builder
	for _, o := range offers {
		alt := ""
		if o.Alternative {
			alt = " (alternative)"
		}
		fmt.Fprintf(&out, "%s x%d %s %s..%s %dh fee=%s on-demand=%s%s\n", o.InstanceType, o.Count, o.Zone,
			h.rel(o.Start), h.rel(o.End), o.DurationHours(), o.Fee, o.OnDemandFee, alt)
	}
	return out.String()
}

// quota reads a team's quota from a command's arguments: quota-block
// (instances per block), quota-held (instances held at once), quota-hours
// (longest block) and quota-lead (hours ahead); an absent one is 0, no
// limit.
func (h *harness) quota(t *testing.T, team string, args map[string]string) Quota {
	q := Quota{Team: team}
	if v, ok := args["quota-block"]; ok {
		q.MaxInstancesPerBlock = atoi(t, v)
	}
	if v, ok := args["quota-held"]; ok {
		q.MaxInstancesHeld = atoi(t, v)
	}
	if v, ok := args["quota-hours"]; ok {
		q.MaxDuration = time.Duration(atoi(t, v)) * time.Hour
	}
	if v, ok := args["quota-lead"]; ok {
		q.MaxLead = time.Duration(atoi(t, v)) * time.Hour
	}
	return q
}

// timeline prints one line per node: one character per hour from the
// transcript's start,
// "." free, the block id's last character where booked, "x" when failed.
func (h *harness) timeline(hours int) string {
	var out strings.Builder
	names := make([]string, 0, len(h.ix.nodes))
	for _, ns := range h.ix.nodes {
		names = append(names, ns.node.Name)
	}
	sort.Strings(names)
	base := h.ix.hourOf(h.start)
	for _, name := range names {
		ns := h.ix.nodes[h.ix.nodeIdx[name]]
		line := []byte(strings.Repeat(".", hours))
		for a := range ns.allocs.all() {
			for hr := max(a.start, base); hr < min(a.end, base+hours); hr++ {
				line[hr-base] = a.block[len(a.block)-1]
			}
		}
		if ns.node.Health == Unhealthy {
			line = []byte(strings.Repeat("x", hours))
		}
		fmt.Fprintf(&out, "%-8s %s\n", name, line)
	}
	return out.String()
}

func (h *harness) rel(t time.Time) string { return fmt.Sprintf("+%dh", int(t.Sub(h.start)/time.Hour)) }

func placementString(pls []Placement) string {
	var parts []string
	for _, p := range pls {
		if len(p.GPUs) == 8 {
			parts = append(parts, p.Node) // a whole 8-GPU node
			continue
		}
		parts = append(parts, fmt.Sprintf("%s%v", p.Node, p.GPUs))
	}
	return strings.Join(parts, " ")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
