package local

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/core"
)

// twoNodeBlock is an active block of four 4-GPU instances on two nodes.
func twoNodeBlock() core.Block {
	return core.Block{ID: "cb-1", Count: 4, End: time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC),
		Placements: []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
}

// TestLocalEnv: the local engine sets the README's environment contract,
// rendezvous on this machine at the job's port, and the GPUs of the slot
// the instance's rank is given.
func TestLocalEnv(t *testing.T) {
	base := backend.Workload{JobID: "job-1", Run: "job-1/2", WorldSize: 2, Block: twoNodeBlock(), PlanID: "tp-1", GPUsPerInstance: 4,
		Restarts: 2, Env: map[string]string{"NCCL_DEBUG": "INFO", "RANK": "9", "CUDA_VISIBLE_DEVICES": "0-7"}}
	port := masterPort("job-1")
	standard := map[string]string{
		"CAPBLOCK_BLOCK_ID":       "cb-1",
		"CAPBLOCK_PLAN_ID":        "tp-1",
		"CAPBLOCK_SEGMENT_END":    "2026-03-01T14:00:00Z",
		"CAPBLOCK_SEGMENT_END_MS": "1772373600000",
		"CAPBLOCK_CHECKPOINT_DIR": "/jobs/job-1/checkpoint",
		"CAPBLOCK_RESTART_COUNT":  "2",
		"WORLD_SIZE":              "2",
		"MASTER_ADDR":             "127.0.0.1",
		"MASTER_PORT":             strconv.Itoa(port),
		"HOME":                    "/jobs/job-1",
		"NCCL_DEBUG":              "INFO",
	}
	with := func(kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range standard {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := map[string]struct {
		rank   int
		slots  []int
		gpus   int
		killAt bool
		want   map[string]string
	}{
		"no slots: rank 0 has the first slot": {
			rank: 0, gpus: 4, want: with("RANK", "0", "CUDA_VISIBLE_DEVICES", "0,1,2,3"),
		},
		"no slots: rank 1 has the second": {
			rank: 1, gpus: 4, want: with("RANK", "1", "CUDA_VISIBLE_DEVICES", "4,5,6,7"),
		},
		"held slots: rank 0 on slot 2, the second node's first half": {
			rank: 0, slots: []int{2, 3}, gpus: 4, want: with("RANK", "0", "CUDA_VISIBLE_DEVICES", "0,1,2,3"),
		},
		"held slots: rank 1 on slot 1": {
			rank: 1, slots: []int{3, 1}, gpus: 4, want: with("RANK", "1", "CUDA_VISIBLE_DEVICES", "4,5,6,7"),
		},
		"whole-node instances": {
			rank: 1, slots: []int{0, 1}, gpus: 8, want: with("RANK", "1", "CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"),
		},
		"a preemptible run: its kill-at file": {
			rank: 0, gpus: 4, killAt: true,
			want: with("RANK", "0", "CUDA_VISIBLE_DEVICES", "0,1,2,3", "CAPBLOCK_KILL_AT_FILE", "/jobs/notices/job-1/kill-at"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := base
			w.Rank, w.Slots, w.GPUsPerInstance = tc.rank, tc.slots, tc.gpus
			if tc.killAt {
				w.KillAt = w.Block.End
			}
			if diff := cmp.Diff(tc.want, localEnv(w, "/jobs/job-1")); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKillAtFile: a preemptible run's kill-at file holds the time it was
// started with, and what NoticeKill says after, in a directory of the
// server's that other users cannot write; a job that never started has
// none, and a notice for it makes none.
func TestKillAtFile(t *testing.T) {
	dir := t.TempDir()
	li := &localInstances{l: &Workloads{dir: dir}}
	if err := li.NoticeKill("job-1/1", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	path := killAtPath(dir, "job-1")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a notice for a job never started made %s: %v", path, err)
	}
	start := time.Date(2026, 12, 1, 0, 59, 55, 0, time.UTC)
	if err := writeKillAt(dir, "job-1", start, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "2026-12-01T00:59:55Z" {
		t.Errorf("at the start: %q", got)
	}
	if err := li.NoticeKill("job-1/1", 0, start.Add(-40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "2026-12-01T00:19:55Z" {
		t.Errorf("after a notice: %q", got)
	}
	for _, d := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s has mode %v: want written by the server alone", d, fi.Mode())
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the job's notices: %v, want the kill-at file alone", entries)
	}
	if err := li.NoticeKill("../state/1", 0, start); err == nil {
		t.Error("a notice for a run that names no job's directory was taken")
	}
}

// TestMasterPort: a job's port is the same for every run and instance,
// in 29500–30499, and jobs differ.
func TestMasterPort(t *testing.T) {
	seen := map[int]bool{}
	for _, id := range []string{"job-a", "job-b", "job-c", "job-0123456789abcdef"} {
		p := masterPort(id)
		if p < 29500 || p > 30499 {
			t.Errorf("masterPort(%s) = %d, want 29500–30499", id, p)
		}
		if again := masterPort(id); again != p {
			t.Errorf("masterPort(%s) = %d, then %d", id, p, again)
		}
		seen[p] = true
	}
	if len(seen) < 2 {
		t.Errorf("every job has the same port: %v", seen)
	}
}

// TestLocalRunAndReadLog: an instance started through the local engine
// runs in the job's directory with the contract's variables, ends on
// Exits under its run, and its log reads back by job and rank; a log not
// written yet reads as empty.
func TestLocalRunAndReadLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jobs")
	l, err := NewWorkloads(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if data, next, err := l.ReadLog(t.Context(), "job-1", 0, 0, 0); err != nil || len(data) != 0 || next != 0 {
		t.Fatalf("ReadLog before a start = %q, %d, %v; want empty at 0", data, next, err)
	}
	ins, err := l.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	w := backend.Workload{JobID: "job-1", Run: "job-1/0", Rank: 1, WorldSize: 2, Block: twoNodeBlock(), GPUsPerInstance: 4,
		Command: []string{"sh", "-c", `echo "$RANK $CUDA_VISIBLE_DEVICES $MASTER_ADDR $PWD"; test -d "$CAPBLOCK_CHECKPOINT_DIR"`}}
	if err := ins.Start(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-ins.Exits():
		if x.JobID != "job-1/0" || x.Instance != 1 || x.Code != 0 {
			t.Fatalf("exit = %+v, want job-1/0 instance 1 code 0", x)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the instance did not end within 15s")
	}
	work, _ := filepath.EvalSymlinks(filepath.Join(dir, "job-1"))
	data, next, err := l.ReadLog(t.Context(), "job-1", 1, 0, 0)
	if want := "1 4,5,6,7 127.0.0.1 " + work + "\n"; err != nil || string(data) != want || next != int64(len(want)) {
		t.Errorf("ReadLog = %q, %d, %v; want %q, %d", data, next, err, want, len(want))
	}
	if fi, err := os.Stat(filepath.Join(dir, "logs")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("logs directory: %v, %v; want mode 0700", fi, err)
	}
	if _, _, err := l.ReadLog(t.Context(), "../x", 0, 0, 0); err == nil {
		t.Error("ReadLog of job ../x: no error")
	}
}

// TestLocalStartsAnInstanceOnce: a start of a run's instance applied
// again, after the instance ended (an outbox action applied anew after a
// crash), runs nothing; the next run's instance starts.
func TestLocalStartsAnInstanceOnce(t *testing.T) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	l, err := NewWorkloads(filepath.Join(dir, "jobs"), false)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := l.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ins.Close() })
	w := backend.Workload{JobID: "job-1", Run: "job-1/1", WorldSize: 1, Block: twoNodeBlock(), GPUsPerInstance: 8,
		Command: []string{"/bin/sh", "-c", `echo "$CAPBLOCK_RESTART_COUNT" >> ` + marks}}
	ended := func() {
		t.Helper()
		select {
		case x := <-ins.Exits():
			if x.Code != 0 || x.Err != nil {
				t.Fatalf("the instance ended with %d, %v", x.Code, x.Err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the instance did not end within 10s")
		}
	}
	if err := ins.Start(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	ended()
	if err := ins.Start(t.Context(), w); err != nil {
		t.Fatalf("starting the run's instance again: %v", err)
	}
	select {
	case x := <-ins.Exits():
		t.Fatalf("the instance ran again: %+v", x)
	case <-time.After(300 * time.Millisecond):
	}
	w.Run, w.Restarts = "job-1/2", 1
	if err := ins.Start(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	ended()
	data, err := os.ReadFile(marks)
	if err != nil || string(data) != "0\n1\n" {
		t.Errorf("runs recorded %q, %v; want run 1 then run 2, once each", data, err)
	}
}
