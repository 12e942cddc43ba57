package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// TestSbatchArgs: a run's batch job has one task per instance, as many
// to a node as the block holds there, each with its instance's GPUs,
// in the block's reservation until its end.
func TestSbatchArgs(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	whole := func(nodes ...string) []core.Placement {
		var out []core.Placement
		for _, n := range nodes {
			out = append(out, core.Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
		}
		return out
	}
	tests := map[string]struct {
		placements []core.Placement
		gpus, size int
		end        time.Duration
		account    string
		want       string
	}{
		"an instance per node": {placements: whole("a", "b"), gpus: 8, size: 2, end: 2 * time.Hour,
			want: "--nodes=2 --ntasks=2 --ntasks-per-node=1 --gpus-per-task=8 --time=0-02:00:00"},
		"eight to a node": {placements: whole("a", "b"), gpus: 1, size: 12, end: 90 * time.Minute,
			want: "--nodes=2 --ntasks=12 --ntasks-per-node=8 --gpus-per-task=1 --time=0-01:30:00"},
		"fewer instances than the block": {placements: whole("a", "b", "c"), gpus: 8, size: 1, end: 49 * time.Hour,
			want: "--nodes=1 --ntasks=1 --ntasks-per-node=1 --gpus-per-task=8 --time=2-01:00:00"},
		"part of a node": {placements: []core.Placement{{Node: "a", GPUs: []int{2}}, {Node: "a", GPUs: []int{3}}}, gpus: 1, size: 2, end: time.Hour,
			want: "--nodes=1 --ntasks=2 --ntasks-per-node=2 --gpus-per-task=1 --time=0-01:00:00"},
		"the end within a minute": {placements: whole("a"), gpus: 8, size: 1, end: 20 * time.Second, account: "research",
			want: "--nodes=1 --ntasks=1 --ntasks-per-node=1 --gpus-per-task=8 --time=0-00:01:00 --account=research"},
	}
	wl := &Workloads{cfg: JobsConfig{Dir: "/jobs"}}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := backend.Workload{JobID: "job-1", Run: "job-1/3", WorldSize: tc.size, GPUsPerInstance: tc.gpus,
				Block: core.Block{ID: "cb-1", End: now.Add(tc.end), Placements: tc.placements}}
			var got []string
			for _, a := range wl.sbatchArgs(w, tc.account, now) {
				for _, k := range []string{"--nodes=", "--ntasks", "--gpus-per-task=", "--time=", "--account="} {
					if strings.HasPrefix(a, k) {
						got = append(got, a)
					}
				}
			}
			if diff := cmp.Diff(tc.want, strings.Join(got, " ")); diff != "" {
				t.Errorf("sbatch's options (-want +got):\n%s", diff)
			}
		})
	}
	args := strings.Join(wl.sbatchArgs(backend.Workload{JobID: "job-1", Run: "job-1/3", WorldSize: 1, Block: core.Block{ID: "cb-1"}}, "", now), " ")
	for _, want := range []string{"--job-name=job-1/3", "--comment=capblock-run", "--reservation=cb-1", "--no-requeue",
		"--chdir=/jobs/job-1", "--output=/jobs/logs/job-1/run-3.batch.log"} {
		if !strings.Contains(args, want) {
			t.Errorf("sbatch's options lack %s: %s", want, args)
		}
	}
}
