package slurm

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// TestReadNodes reads recorded `scontrol --oneliner --all show nodes`
// outputs (nodes-22.05.txt from a real Slurm 22.05 of slurmtest: a
// drained node whose reason holds "a=b", a down one, a declared node
// without a slurmd; nodes-gres.txt edited from it for the GRES forms,
// states and features a site has) into the inventory's nodes, the ones
// left out and why, and their health, compared with the golden
// nodes-*.golden (go test -run TestReadNodes -update rewrites them).
func TestReadNodes(t *testing.T) {
	reader := nodeReader{sold: []string{"H100", "L4", "V100"}, partitions: []string{"gpu"}, zone: "capblock",
		rackFeature: DefaultRackFeature, zoneFeature: DefaultZoneFeature}
	files, err := filepath.Glob("testdata/nodes-*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded outputs: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, r := range parseRecords(string(data)) {
				n, why, notable := reader.read(r)
				switch {
				case why != "" && notable:
					fmt.Fprintf(&b, "%s: left out, logged: %s\n", r["NodeName"], why)
				case why != "":
					fmt.Fprintf(&b, "%s: left out: %s\n", r["NodeName"], why)
				default:
					var labels []string
					for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
						labels = append(labels, k+"="+n.Labels[k])
					}
					fmt.Fprintf(&b, "%s: zone %s, rack %q, %d × %s, labels %s\n", n.Name, n.Zone, n.Rack, n.GPUs, n.GPUModel, strings.Join(labels, " "))
					if reason := unhealthyReason(r); reason != "" {
						fmt.Fprintf(&b, "  unhealthy: %s\n", reason)
					}
				}
			}
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if diff := cmp.Diff(string(want), b.String()); diff != "" {
				t.Errorf("%s (-golden +got):\n%s", golden, diff)
			}
		})
	}
}

// TestParseRecords: values with spaces read whole, a reason takes the
// rest of its line, and a word that only looks like a key inside a value
// is kept in it.
func TestParseRecords(t *testing.T) {
	got := parseRecords("NodeName=a OS=Linux 6.1 #1 SMP  State=IDLE+DRAIN Reason=x=1 y [root@t]\n\nReservationName=r Users=(null)\n")
	want := []record{
		{"NodeName": "a", "OS": "Linux 6.1 #1 SMP", "State": "IDLE+DRAIN", "Reason": "x=1 y [root@t]"},
		{"ReservationName": "r", "Users": "(null)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if l := got[1].list("Users"); l != nil {
		t.Errorf("(null) reads as %q, want no names", l)
	}
}

func TestDefaultModel(t *testing.T) {
	for in, want := range map[string]string{
		"h100": "H100", "nvidia_h100_80gb_hbm3": "H100", "tesla_v100-sxm2-16gb": "V100", "l40s": "L40S", "a100_80g": "A100", "": "",
	} {
		if got := DefaultModel(in); got != want {
			t.Errorf("DefaultModel(%q) = %q, want %q", in, got, want)
		}
	}
}
