package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/clock"
	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// The tests of the job runner against a recording engine.

// recordedWorkloads is an engine that records the calls the job runner
// makes, each as a line on calls.
type recordedWorkloads struct {
	calls  chan string
	starts chan backend.Workload
	exits  chan backend.InstanceExit
}

func newRecordedWorkloads() *recordedWorkloads {
	return &recordedWorkloads{calls: make(chan string, 64), starts: make(chan backend.Workload, 64), exits: make(chan backend.InstanceExit)}
}

func (r *recordedWorkloads) Open() (backend.Instances, error) { return r, nil }

func (r *recordedWorkloads) ReadLog(_ context.Context, jobID string, instance int, offset int64, limit int) ([]byte, int64, error) {
	r.calls <- fmt.Sprintf("read-log %s %d from %d", jobID, instance, offset)
	return []byte("hello\n"), offset + 6, nil
}

func (r *recordedWorkloads) Start(_ context.Context, w backend.Workload) error {
	r.calls <- fmt.Sprintf("start %s rank %d slot %d", w.Run, w.Rank, w.Slot())
	r.starts <- w
	return nil
}

func (r *recordedWorkloads) Stop(run string, instance int, grace time.Duration) error {
	r.calls <- fmt.Sprintf("stop %s %d after %s", run, instance, grace)
	return nil
}

func (r *recordedWorkloads) Adopt() ([]backend.RunningInstance, error) { return nil, nil }
func (r *recordedWorkloads) Exits() <-chan backend.InstanceExit        { return r.exits }
func (r *recordedWorkloads) Close() error                              { return nil }

// next waits for the next n calls.
func (r *recordedWorkloads) next(t *testing.T, n int) []string {
	t.Helper()
	var got []string
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case c := <-r.calls:
			got = append(got, c)
		case <-timeout:
			t.Fatalf("calls so far %q; want %d within 10s", got, n)
		}
	}
	return got
}

// jobRunner is a service on a SQLite file with one active block, cb-a,
// of two h100.8x, whose jobs run on a recording engine; the service
// leads (Run) until the test ends.
func jobRunner(t *testing.T) (*Service, *recordedWorkloads, *sqlite.Store) {
	rec := newRecordedWorkloads()
	svc, st := jobRunnerOn(t, clock.NewSim(planT0), planHour(-1), planHour(10), rec, nil)
	return svc, rec, st
}

// jobRunnerOn is jobRunner on clk, with cb-a active from start to end,
// its jobs run through w, and the service's runtime changed by tune
// before it runs, when not nil.
func jobRunnerOn(t *testing.T, clk clock.Clock, start, end time.Time, w backend.Workloads, tune func(*Service)) (*Service, *sqlite.Store) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "jobs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := core.Block{ID: "cb-a", Team: "t", InstanceType: "h100.8x", GPUModel: "H100", Count: 2, Zone: "z",
		Start: start, End: end, State: core.StateActive, CreatedAt: start.Add(-time.Hour),
		Fee:        core.Money{Minor: 1, Currency: "USD"},
		Placements: []core.Placement{{Node: "n0", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, {Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}}
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{b}}); err != nil {
		t.Fatal(err)
	}
	f := core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing(),
		Types: []core.InstanceType{{Name: "h100.8x", GPUModel: "H100", GPUsPerInstance: 8, OnDemand: core.Money{Minor: 9832, Currency: "USD"}}}}
	for _, n := range []string{"n0", "n1"} {
		f.Nodes = append(f.Nodes, core.Node{Name: n, Zone: "z", Rack: "r", GPUModel: "H100", GPUs: 8, Health: core.Healthy})
	}
	svc, err := New(ctx, Config{Fleet: f, Store: st, Clock: clk, Log: slog.New(slog.DiscardHandler), Workloads: w})
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(svc)
	}
	runService(t, svc)
	return svc, st
}

// TestJobRunsThroughWorkloads: a job on an active block of two whole-node
// instances starts one instance per rank through the engine, each on its
// slot, with the job's command, environment and restart count; stopping
// the job stops both; its log is read through the engine.
func TestJobRunsThroughWorkloads(t *testing.T) {
	ctx := t.Context()
	svc, rec, _ := jobRunner(t)

	// 1. The job starts: one instance per rank, on the slots it holds.
	j, err := svc.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-a", Command: []string{"python", "train.py"}, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	run := j.ID + "/1" // a job's first run
	want := []string{"start " + run + " rank 0 slot 0", "start " + run + " rank 1 slot 1"}
	if diff := cmp.Diff(want, rec.next(t, 2)); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	w := <-rec.starts
	<-rec.starts
	w.Block = core.Block{ID: w.Block.ID}
	// On the simulated clock the deadline is a lease from now
	// (TestJobDeadlines).
	w.Limits.Deadline = time.Time{}
	wantW := backend.Workload{JobID: j.ID, Run: run, Rank: 0, WorldSize: 2, Block: core.Block{ID: "cb-a"}, Slots: []int{0, 1},
		GPUsPerInstance: 8, Command: []string{"python", "train.py"}, Env: map[string]string{"A": "1"}, Team: "t",
		Limits: backend.Limits{StopGrace: 30 * time.Second}}
	if diff := cmp.Diff(wantW, w); diff != "" {
		t.Errorf("workload (-want +got):\n%s", diff)
	}

	// 2. Stopping the job stops both instances.
	if _, err := svc.StopJob(ctx, "t", j.ID); err != nil {
		t.Fatal(err)
	}
	want = []string{"stop " + run + " 0 after 30s", "stop " + run + " 1 after 30s"}
	if diff := cmp.Diff(want, rec.next(t, 2)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}

	// 3. Its log is the engine's.
	data, next, err := svc.JobLogs(ctx, "t", j.ID, 1, 4, 0)
	if err != nil || string(data) != "hello\n" || next != 10 {
		t.Errorf("JobLogs = %q, %d, %v; want \"hello\\n\", 10", data, next, err)
	}
	if diff := cmp.Diff([]string{"read-log " + j.ID + " 1 from 4"}, rec.next(t, 1)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestJobRunWaitsForItsLastRun: an instance that fails restarts its job;
// the commit stores the stop of the run's other instance and the start
// of the next run, and the start waits, shown in the action, until the
// last instance of the run before has ended, however often the engine
// reports another's end: a job never runs twice at once.
func TestJobRunWaitsForItsLastRun(t *testing.T) {
	ctx := t.Context()
	svc, rec, st := jobRunner(t)
	j, err := svc.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-a", Command: []string{"train"}, InstanceCount: 2, MaxRestarts: 1})
	if err != nil {
		t.Fatal(err)
	}
	run1, run2 := j.ID+"/1", j.ID+"/2"
	rec.next(t, 2) // both instances start
	<-rec.starts
	<-rec.starts

	// 1. Instance 0 fails: the other is stopped, the next run waits.
	rec.exits <- backend.InstanceExit{JobID: run1, Instance: 0, Code: 1}
	want := []string{"stop " + run1 + " 0 after 30s", "stop " + run1 + " 1 after 30s"}
	if diff := cmp.Diff(want, rec.next(t, 2)); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	waitFor(t, 10*time.Second, "the next run's start to wait for the last run's end", func() bool {
		as, err := st.ActionsFor(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Kind == core.ActionStartInstance && a.State == core.ActionPending && strings.Contains(a.LastError, "run 1") {
				return true
			}
		}
		return false
	})
	// An end reported twice (an engine that reports at least once)
	// counts once: run 1 still has an instance.
	rec.exits <- backend.InstanceExit{JobID: run1, Instance: 0, Code: 1}
	time.Sleep(100 * time.Millisecond) // for a start that should not come
	select {
	case c := <-rec.calls:
		t.Fatalf("%s while run 1 still has an instance", c)
	default:
	}

	// 2. Its last instance ends: the next run starts.
	rec.exits <- backend.InstanceExit{JobID: run1, Instance: 1, Code: 143}
	want = []string{"start " + run2 + " rank 0 slot 0", "start " + run2 + " rank 1 slot 1"}
	if diff := cmp.Diff(want, rec.next(t, 2)); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	if got, err := svc.GetJob(ctx, "t", j.ID); err != nil || got.Run != 2 || got.Restarts != 1 || got.State != core.JobRunning {
		t.Errorf("job after the restart: %+v, %v; want run 2, one restart, running", got, err)
	}
}

// TestJobStoppedThroughAnotherReplica: a job stopped through a replica
// that does not lead (no job runner open there) is stopped by the
// leader, from the actions the stop's commit stored.
func TestJobStoppedThroughAnotherReplica(t *testing.T) {
	ctx := t.Context()
	leader, rec, st := jobRunner(t)
	j, err := leader.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-a", Command: []string{"train"}, InstanceCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec.next(t, 1)
	<-rec.starts
	other, err := New(ctx, Config{Fleet: leader.fleet, Store: st, Clock: clock.NewSim(planT0), Log: slog.New(slog.DiscardHandler), Workloads: newRecordedWorkloads()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.StopJob(ctx, "t", j.ID); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"stop " + j.ID + "/1 0 after 30s"}, rec.next(t, 1)); diff != "" {
		t.Errorf("the leader's calls (-want +got):\n%s", diff)
	}
}

// deadlineWorkloads is a recording engine that keeps deadlines, as the
// local engine does: each SetDeadline comes on deadlines.
type deadlineWorkloads struct {
	*recordedWorkloads
	deadlines chan setDeadline
}

type setDeadline struct {
	run      string
	instance int
	at       time.Time
}

func (d *deadlineWorkloads) Open() (backend.Instances, error) { return d, nil }

func (d *deadlineWorkloads) SetDeadline(run string, instance int, at time.Time) error {
	d.deadlines <- setDeadline{run, instance, at}
	return nil
}

// TestJobDeadlines: each instance starts with a deadline on the wall
// clock, after which its engine ends it by itself: on the wall clock the
// block's end, moved when the block is extended; on a simulated clock a
// lease, renewed while the runner runs.
func TestJobDeadlines(t *testing.T) {
	t.Run("wall clock: the block's end, moved by an extension", func(t *testing.T) {
		ctx := t.Context()
		now := time.Now().UTC().Truncate(time.Second)
		d := &deadlineWorkloads{recordedWorkloads: newRecordedWorkloads(), deadlines: make(chan setDeadline, 16)}
		svc, st := jobRunnerOn(t, clock.Wall{}, now.Add(-time.Hour), now.Add(3*time.Hour), d,
			func(s *Service) { s.jobs.renew = 50 * time.Millisecond })
		j, err := svc.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-a", Command: []string{"train"}, InstanceCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		w := <-d.starts
		if l := w.Limits; !l.Deadline.Equal(now.Add(3*time.Hour)) || l.StopGrace != 30*time.Second {
			t.Errorf("limits %+v, want the block's end, %s, and a grace of 30s", l, now.Add(3*time.Hour))
		}
		time.Sleep(200 * time.Millisecond) // renewals that should move nothing
		select {
		case sd := <-d.deadlines:
			t.Fatalf("deadline moved to %s without a change of the block", sd.at)
		default:
		}
		b, err := st.GetBlock(ctx, "cb-a")
		if err != nil {
			t.Fatal(err)
		}
		was := b.Version
		b.End = b.End.Add(2 * time.Hour)
		b.Version++
		if err := st.Commit(ctx, store.Change{Update: []store.BlockUpdate{{Block: b, ExpectedVersion: was}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case sd := <-d.deadlines:
			if want := (setDeadline{j.ID + "/1", 0, now.Add(5 * time.Hour)}); !sd.at.Equal(want.at) || sd.run != want.run || sd.instance != 0 {
				t.Errorf("SetDeadline %+v, want %+v", sd, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the extension did not move the deadline")
		}
	})
	t.Run("simulated clock: a lease, renewed", func(t *testing.T) {
		ctx := t.Context()
		d := &deadlineWorkloads{recordedWorkloads: newRecordedWorkloads(), deadlines: make(chan setDeadline, 16)}
		svc, _ := jobRunnerOn(t, clock.NewSim(planT0), planHour(-1), planHour(10), d,
			func(s *Service) { s.jobs.renew = 50 * time.Millisecond })
		j, err := svc.CreateJob(ctx, "t", contract.JobRequest{BlockID: "cb-a", Command: []string{"train"}, InstanceCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		w := <-d.starts
		if lease := w.Limits.Deadline.Sub(started); lease < simDeadlineLease-5*time.Second || lease > simDeadlineLease+5*time.Second {
			t.Errorf("deadline %s from now, want a lease of %s on a simulated clock", lease, simDeadlineLease)
		}
		last := w.Limits.Deadline
		for range 2 {
			select {
			case sd := <-d.deadlines:
				if sd.run != j.ID+"/1" || !sd.at.After(last) {
					t.Errorf("SetDeadline %+v, want the lease of %s/1 renewed after %s", sd, j.ID, last)
				}
				last = sd.at
			case <-time.After(10 * time.Second):
				t.Fatal("the lease was not renewed")
			}
		}
	})
}
