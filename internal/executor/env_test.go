package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestJobEnv(t *testing.T) {
	end := time.Date(2026, 3, 1, 14, 0, 0, 0, time.FixedZone("CET", 3600))
	base := EnvParams{
		BlockID: "blk-1", PlanID: "plan-2", SegmentEnd: end,
		CheckpointDir: "/ckpt/job-3", RestartCount: 2,
		Rank: 1, WorldSize: 4, MasterAddr: "10.0.0.5", MasterPort: 29500,
	}
	standard := map[string]string{
		"CAPBLOCK_BLOCK_ID":       "blk-1",
		"CAPBLOCK_PLAN_ID":        "plan-2",
		"CAPBLOCK_SEGMENT_END":    "2026-03-01T13:00:00Z",
		"CAPBLOCK_SEGMENT_END_MS": "1772370000000",
		"CAPBLOCK_CHECKPOINT_DIR": "/ckpt/job-3",
		"CAPBLOCK_RESTART_COUNT":  "2",
		"RANK":                    "1",
		"WORLD_SIZE":              "4",
		"MASTER_ADDR":             "10.0.0.5",
		"MASTER_PORT":             "29500",
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := map[string]struct {
		gpus []int
		user map[string]string
		want map[string]string
	}{
		"gpus are listed with commas": {
			gpus: []int{0, 1, 2},
			want: with(standard, "CUDA_VISIBLE_DEVICES", "0,1,2"),
		},
		"no gpus hides every gpu": {
			want: with(standard, "CUDA_VISIBLE_DEVICES", ""),
		},
		"user variables are kept but capblock's win": {
			gpus: []int{3},
			user: map[string]string{"NCCL_DEBUG": "INFO", "RANK": "7", "CUDA_VISIBLE_DEVICES": "0,1"},
			want: with(standard, "CUDA_VISIBLE_DEVICES", "3", "NCCL_DEBUG", "INFO"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := base
			p.GPUs, p.User = tc.gpus, tc.user
			if diff := cmp.Diff(tc.want, JobEnv(p)); diff != "" {
				t.Errorf("JobEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStartGivesTheJobItsEnvironment: an instance's environment is
// the job's variables over a fixed base; nothing of the server's own
// environment reaches it, its PATH above all: a root server's PATH names
// root's folders (a pyenv's shims, a toolchain under /root).
func TestStartGivesTheJobItsEnvironment(t *testing.T) {
	t.Setenv("CAPBLOCK_SERVER_SECRET", "must-not-leak")
	t.Setenv("LANG", "de_DE.UTF-8")
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("PATH", "/root/.pyenv/shims:"+os.Getenv("PATH"))
	e, _ := newTestExecutor(t)
	out := filepath.Join(t.TempDir(), "env")
	dir := t.TempDir()
	s := spec(t, "env", "sh", "-c", `env >"$1"`, "sh", out)
	s.Dir = dir
	s.Env = JobEnv(EnvParams{
		BlockID: "blk-1", PlanID: "plan-1", SegmentEnd: time.UnixMilli(1772370000000),
		CheckpointDir: "/ckpt", RestartCount: 1, Rank: 0, WorldSize: 2,
		MasterAddr: "127.0.0.1", MasterPort: 29500, GPUs: []int{0, 1, 2},
		User: map[string]string{"USER_VAR": "a=b c"},
	})
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit = %+v, want 0", x)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	delete(got, "PWD") // set by the shell itself
	want := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": dir, "LANG": "C.UTF-8", "TMPDIR": "/tmp",
	}
	for k, v := range s.Env {
		want[k] = v
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment of the process (-want +got):\n%s", diff)
	}
}

// TestAJobMayChooseItsPath: the job's own PATH wins over the default,
// both to find its command and in its environment.
func TestAJobMayChooseItsPath(t *testing.T) {
	e, _ := newTestExecutor(t)
	bin := t.TempDir()
	out := filepath.Join(t.TempDir(), "path")
	if err := os.WriteFile(filepath.Join(bin, "mine"), []byte("#!/bin/sh\necho \"$PATH\" >\"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := spec(t, "path", "mine", out)
	s.Env = map[string]string{"PATH": bin + ":/usr/bin:/bin"}
	start(t, e, s)
	if x := nextExit(t, e); x.Code != 0 || x.Err != nil {
		t.Fatalf("exit = %+v, want 0", x)
	}
	if b, err := os.ReadFile(out); err != nil || strings.TrimSpace(string(b)) != bin+":/usr/bin:/bin" {
		t.Errorf("the job's PATH = %q, %v; want its own", b, err)
	}
}

func TestChildEnvRejectsInvalidNames(t *testing.T) {
	for _, env := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00y"}} {
		if _, err := childEnv(env, ""); err == nil {
			t.Errorf("childEnv(%q) succeeded, want an error", env)
		}
	}
}
