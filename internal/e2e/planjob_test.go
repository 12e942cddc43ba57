package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stepCounter is a training script that follows the checkpoint contract:
// it resumes from the step in $CAPBLOCK_CHECKPOINT_DIR/step, records every
// step it does in steps.log, saves each step before the next, and on
// SIGTERM finishes the step in hand, saves and exits 0. It logs the end
// of its segment at each start. SIGTERM goes to the job's whole process
// group, so a step is saved with shell builtins only: an external command
// (mv) would be killed by the signal half-way through the step.
const stepCounter = `ck="$CAPBLOCK_CHECKPOINT_DIR"
s=$(cat "$ck/step" 2>/dev/null || echo 0)
echo "start at step $s, segment ends $CAPBLOCK_SEGMENT_END, restart $CAPBLOCK_RESTART_COUNT"
echo "$CAPBLOCK_SEGMENT_END" >> "$ck/segments.log"
stop=
trap 'stop=1' TERM
while [ "$s" -lt "$TOTAL" ]; do
  [ -n "$stop" ] && { echo "stopped at step $s"; exit 0; }
  s=$((s+1))
  echo "$s" >> "$ck/steps.log"
  echo "$s" > "$ck/step"
  sleep 0.02
done
echo "done at step $s"
`

// TestJobAcrossPlanSegments: a job on a two-segment plan starts when
// segment 1 becomes active, is interrupted at segment 1's termination,
// resumes in segment 2 from its checkpoint and finishes with the full
// count: no step lost, none done twice.
func TestJobAcrossPlanSegments(t *testing.T) {
	e := start(t)
	runService(t, e)
	splitPool(e) // 48 hours of 4 × h100.8x fit only as [2h, 26h) and [38h, 62h)
	o := e.planOfferings(splitQuery)[0]
	if len(o.Segments) != 2 {
		t.Fatalf("offering with %d segments", len(o.Segments))
	}
	var p plan
	if code := call(t, e.url, "POST", "/v1/plans", map[string]any{"offeringId": o.OfferingID, "name": "llm", "clientToken": "pj-1"}, &p); code != 201 {
		t.Fatalf("buying the plan: %d", code)
	}
	script := writeScript(t, stepCounter)
	const total = 80
	var j job
	if code := call(t, e.url, "POST", "/v1/jobs", map[string]any{"name": "count", "planId": p.ID, "command": []string{script},
		"instanceCount": 1, "env": map[string]string{"TOTAL": strconv.Itoa(total)}}, &j); code != 201 || j.State != "pending" {
		t.Fatalf("creating the job: %d %+v", code, j)
	}
	ckpt := filepath.Join(filepath.Dir(e.db), "jobs", j.ID, "checkpoint")
	step := func() int {
		b, _ := os.ReadFile(filepath.Join(ckpt, "step"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}

	// 1. Segment 1 becomes active: the job runs.
	e.advance(2 * time.Hour)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	for deadline := time.Now().Add(10 * time.Second); step() < 10 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if step() < 10 {
		t.Fatalf("the job made %d steps in segment 1", step())
	}
	if got := e.plan(p.ID); got.State != "active" || got.InUse != 1 {
		t.Errorf("plan during segment 1: state %s, inUse %d", got.State, got.InUse)
	}
	// 2. Segment 1 terminates: the job checkpoints and is interrupted.
	e.advance(23*time.Hour + 30*time.Minute)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "interrupted" })
	var logs struct{ Data string }
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.Data, "stopped at step") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		call(t, e.url, "GET", "/v1/jobs/"+j.ID+"/logs", nil, &logs)
	}
	paused := step()
	if paused >= total || !strings.Contains(logs.Data, "stopped at step") {
		t.Fatalf("interrupted at step %d of %d; log %q", paused, total, logs.Data)
	}
	// 3. The gap: it waits.
	e.advance(time.Hour) // segment 1 expired
	time.Sleep(300 * time.Millisecond)
	if got := waitJob(t, e, j.ID, func(job) bool { return true }); got.State != "interrupted" || step() != paused {
		t.Fatalf("in the gap: %+v, step %d (was %d)", got, step(), paused)
	}
	// 4. Segment 2: it resumes from its checkpoint and finishes.
	e.advance(12*time.Hour + 30*time.Minute)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "succeeded" })
	data, err := os.ReadFile(filepath.Join(ckpt, "steps.log"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= total; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if diff := cmp.Diff(want, strings.Fields(string(data))); diff != "" {
		t.Fatalf("steps done (-want +got): a step lost or done twice\n%s", diff)
	}
	segs, _ := os.ReadFile(filepath.Join(ckpt, "segments.log"))
	wantSegs := ts(o.Segments[0].EndTime) + "\n" + ts(o.Segments[1].EndTime) + "\n"
	if string(segs) != wantSegs {
		t.Errorf("CAPBLOCK_SEGMENT_END seen at each start:\n%s\nwant:\n%s", segs, wantSegs)
	}
	call(t, e.url, "GET", "/v1/jobs/"+j.ID+"/logs", nil, &logs)
	if !strings.Contains(logs.Data, "start at step "+strconv.Itoa(paused)) || !strings.Contains(logs.Data, "done at step "+strconv.Itoa(total)) {
		t.Errorf("log: %q", logs.Data)
	}
	var types []string
	for _, ev := range e.events() {
		if ev.Subject == j.ID {
			types = append(types, ev.Type)
		}
	}
	if diff := cmp.Diff([]string{"job.pending", "job.running", "job.interrupted", "job.running", "job.succeeded"}, types); diff != "" {
		t.Errorf("job events (-want +got):\n%s", diff)
	}
}

// TestJobRestartsOnReplacement: a node of an active block fails while its
// job runs; the block gets a replacement and the job restarts there from
// its checkpoint, without using one of its restarts, and finishes with
// every step done once.
func TestJobRestartsOnReplacement(t *testing.T) {
	e := start(t)
	runService(t, e)
	s := t0.Add(2 * time.Hour)
	b, _ := e.buy(e.exact(searchQuery("h100.8x", 2, 8, s, s.Add(8*time.Hour)), 8, s).OfferingID, "rep-1")
	e.advance(2 * time.Hour)
	script := writeScript(t, stepCounter)
	const total = 120
	var j job
	call(t, e.url, "POST", "/v1/jobs", map[string]any{"blockId": b.ID, "command": []string{script}, "instanceCount": 1,
		"env": map[string]string{"TOTAL": strconv.Itoa(total)}}, &j)
	waitJob(t, e, j.ID, func(j job) bool { return j.State == "running" })
	ckpt := filepath.Join(filepath.Dir(e.db), "jobs", j.ID, "checkpoint")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if data, _ := os.ReadFile(filepath.Join(ckpt, "step")); len(data) > 0 && string(data) != "1\n" {
			break
		}
	}
	var st blockStatus
	call(t, e.url, "GET", "/v1/blocks/"+b.ID+"/status", nil, &st)
	var rep nodeReport
	if code := call(t, e.url, "POST", "/v1/admin/nodes/"+st.Placements[0].Node+"/fail", nil, &rep); code != 200 || len(rep.Replaced) != 1 {
		t.Fatalf("failing a node of the block: %d %+v", code, rep)
	}
	j = waitJob(t, e, j.ID, func(j job) bool { return j.State == "succeeded" })
	if j.Restarts != 0 {
		t.Errorf("a node failure used %d of the job's restarts", j.Restarts)
	}
	data, _ := os.ReadFile(filepath.Join(ckpt, "steps.log"))
	var want []string
	for i := 1; i <= total; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if diff := cmp.Diff(want, strings.Fields(string(data))); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	var types []string
	var reason any
	for _, ev := range e.eventsWithData() {
		if ev.Subject == j.ID {
			types = append(types, ev.Type)
			if ev.Type == "job.restarted" {
				reason = ev.Data["reason"]
			}
		}
	}
	if diff := cmp.Diff([]string{"job.pending", "job.running", "job.restarted", "job.succeeded"}, types); diff != "" {
		t.Errorf("job events (-want +got):\n%s", diff)
	}
	if r, _ := reason.(string); !strings.HasPrefix(r, "node_failed: "+st.Placements[0].Node) {
		t.Errorf("restart reason %v", reason)
	}
}
