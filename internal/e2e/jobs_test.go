package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type job struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	Reason   string `json:"reason"`
}

// runService runs the reconciler and the job runner of e until the test ends.
func runService(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitJob polls a job until cond holds, for at most 20 seconds.
func waitJob(t *testing.T, e *env, id string, cond func(job) bool) job {
	t.Helper()
	var j job
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		call(t, e.url, "GET", "/v1/jobs/"+id, nil, &j)
		if cond(j) {
			return j
		}
	}
	t.Fatalf("job %s: %+v never reached the expected state", id, j)
	return j
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestJobOnBlock: a job waits for its block, starts when the block is
// active with the block's environment, is told to stop (SIGTERM) when the
// block starts terminating, and is interrupted; its output is in its log.
func TestJobOnBlock(t *testing.T) {
	e := start(t)
	runService(t, e)
	out := filepath.Join(t.TempDir(), "env")
	script := writeScript(t, `env | grep -E '^(CAPBLOCK_|RANK|WORLD_SIZE|CUDA_VISIBLE_DEVICES|MASTER_)' | sort > "`+out+`.$RANK"
echo "instance $RANK of $WORLD_SIZE up"
trap 'echo "got SIGTERM, checkpointing"; exit 0' TERM
while :; do sleep 0.05; done
`)
	s := t0.Add(2 * time.Hour)
	b, _ := e.buy(e.exact(searchQuery("h100.8x", 2, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "job-block")
	var j job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "train", "blockId": b.ID, "command": []string{script},
		"env": map[string]string{"SEED": "7"}}, &j); code != 201 || j.State != "pending" {
		t.Fatalf("creating the job: %d %+v", code, j)
	}
	e.advance(2 * time.Hour) // the block is active
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	for rank := range 2 {
		var data []byte
		for deadline := time.Now().Add(10 * time.Second); len(data) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			data, _ = os.ReadFile(out + "." + string(rune('0'+rank)))
		}
		env := string(data)
		for _, want := range []string{"CAPBLOCK_BLOCK_ID=" + b.ID, "WORLD_SIZE=2", "RANK=" + string(rune('0'+rank)),
			"CAPBLOCK_SEGMENT_END=" + ts(b.EndTime), "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "CAPBLOCK_CHECKPOINT_DIR=", "CAPBLOCK_RESTART_COUNT=0"} {
			if !strings.Contains(env, want) {
				t.Errorf("instance %d lacks %s in its environment:\n%s", rank, want, env)
			}
		}
	}
	e.advance(3*time.Hour + 30*time.Minute) // end − 30 min: terminating
	j = waitJob(t, e, j.ID, func(j job) bool { return j.State == "interrupted" })
	var logs struct{ Data string }
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.Data, "SIGTERM") && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		call(t, e.url, "GET", "/v1/jobs/"+j.ID+"/logs?instance=1", nil, &logs)
	}
	if !strings.Contains(logs.Data, "instance 1 of 2 up") || !strings.Contains(logs.Data, "got SIGTERM, checkpointing") {
		t.Errorf("instance 1's log: %q", logs.Data)
	}
	e.advance(time.Hour) // the block expires
	j = waitJob(t, e, j.ID, func(j job) bool { return j.State == "failed" })
	if j.Reason != "capacity_ended" {
		t.Errorf("reason %q", j.Reason)
	}
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == j.ID {
			types = append(types, ev.Type)
		}
	}
	if diff := cmp.Diff([]string{"job.pending", "job.running", "job.interrupted", "job.failed"}, types); diff != "" {
		t.Errorf("job events (-want +got):\n%s", diff)
	}
}

// TestJobRestartsAndSucceeds: a job that fails once is restarted, with
// its restart count, and succeeds; a job out of restarts fails; a stopped
// job stops.
func TestJobRestartsAndSucceeds(t *testing.T) {
	e := start(t)
	runService(t, e)
	s := t0.Add(2 * time.Hour)
	b, _ := e.buy(e.exact(searchQuery("l4.1x", 2, 4, s, s.Add(4*time.Hour)), 4, s).OfferingID, "job-restarts")
	e.advance(2 * time.Hour)
	flaky := writeScript(t, `[ "$CAPBLOCK_RESTART_COUNT" -ge 1 ] && exit 0; exit 3`)
	var j job
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{flaky}, "maxRestarts": 2}, &j)
	j = waitJob(t, e, j.ID, func(j job) bool { return j.State == "succeeded" })
	if j.Restarts != 1 {
		t.Errorf("succeeded after %d restarts, want 1", j.Restarts)
	}
	broken := writeScript(t, `exit 5`)
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{broken}, "maxRestarts": 1, "instanceCount": 1}, &j)
	j = waitJob(t, e, j.ID, func(j job) bool { return j.State == "failed" })
	if j.Restarts != 1 || j.Reason != "exit_code 5" {
		t.Errorf("failed job: %+v", j)
	}
	forever := writeScript(t, `while :; do sleep 0.05; done`)
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{forever}}, &j)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	if code := call(t, e.url, "POST", "/v1/jobs/"+j.ID+"/stop", nil, &j); code != 200 || j.State != "stopped" {
		t.Fatalf("stop: %d %+v", code, j)
	}
	var p problem
	if code := call(t, e.url, "POST", "/v1/jobs/"+j.ID+"/stop", nil, &p); code != 409 || p.Code != "invalid_state" {
		t.Errorf("stopping twice: %d %s", code, p.Code)
	}
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{forever}, "instanceCount": 3}, &p); code != 400 {
		t.Errorf("3 instances on a 2-instance block: %d %s", code, p.Code)
	}
}
