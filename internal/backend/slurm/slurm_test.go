package slurm_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/backend"
	"capblock/internal/backend/backendtest"
	"capblock/internal/backend/slurm"
	"capblock/internal/core"
	"capblock/internal/slurmtest"
)

// teams maps the tests' team "ml" (id team-1) to two users that every
// Debian host has; team-2 has no mapping.
var teams = map[string]slurm.Access{"ml": {Users: []string{"nobody", "daemon"}}}

func teamName(_ context.Context, id string) (string, error) {
	if id == "team-1" {
		return "ml", nil
	}
	return "other", nil
}

// newBackend builds a backend on c, as capblock would run it on the
// cluster's host. TZ is set to the cluster's zone, which is not UTC:
// every time the backend writes or reads must still be the block's.
func newBackend(t *testing.T, c *slurmtest.Cluster, cfg slurm.Config) *slurm.Backend {
	t.Helper()
	cfg.Conf = c.Conf
	if cfg.Teams == nil {
		cfg.Teams, cfg.TeamName = teams, teamName
	}
	be, err := slurm.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// block is a block of team-1 on whole 8-GPU nodes.
func block(id string, start, end time.Time, nodes ...string) core.Block {
	b := core.Block{ID: id, Team: "team-1", InstanceType: "h100.8x", GPUModel: "H100", Count: len(nodes), Zone: "capblock",
		Start: start, End: end, State: core.StateScheduled}
	for _, n := range nodes {
		b.Placements = append(b.Placements, core.Placement{Node: n, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	}
	return b
}

// shown is a reservation as the cluster's own scontrol shows it, in the
// cluster's zone.
type shown struct {
	Nodes      string
	Start, End time.Time
	Users      string
	Accounts   string
	Flags      string
	State      string
}

// reservation reads name through the cluster's scontrol; ok is false
// when Slurm has none.
func reservation(t *testing.T, c *slurmtest.Cluster, name string) (res shown, ok bool) {
	t.Helper()
	out, err := c.Run(t.Context(), "", "scontrol", "--oneliner", "show", "reservation", name)
	if err != nil && strings.Contains(err.Error(), "not found") {
		return shown{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	f := map[string]string{}
	for _, w := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(w, "="); ok {
			f[k] = v
		}
	}
	at := func(key string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02T15:04:05", f[key], c.Location())
		if err != nil {
			t.Fatalf("reservation %s: %s: %v", name, key, err)
		}
		return tm.UTC()
	}
	return shown{Nodes: f["Nodes"], Start: at("StartTime"), End: at("EndTime"), Users: f["Users"], Accounts: f["Accounts"],
		Flags: f["Flags"], State: f["State"]}, true
}

// TestBackend drives a real Slurm: the inventory and health of its
// nodes, and a block's reservation through its life.
func TestBackend(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 3, Declared: 1, Features: func(i int) []string {
		return []string{"rack=r" + string(rune('1'+i%2))}
	}})
	clock := &testClock{now: time.Now()}
	be := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, Grace: time.Minute, Now: clock.Now})
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)

	t.Run("inventory and health", func(t *testing.T) {
		nodes, err := be.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range nodes {
			got = append(got, n.Name+" "+n.Zone+" "+n.Rack+" "+n.GPUModel+" "+string(rune('0'+n.GPUs)))
		}
		want := []string{"sim0 capblock r1 H100 8", "sim1 capblock r2 H100 8", "sim2 capblock r1 H100 8", "sim3 capblock r2 H100 8"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("inventory (-want +got):\n%s", diff)
		}
		c.Scontrol(t, "update", "NodeName=sim2", "State=DRAIN", "Reason=XID 79")
		health, err := be.NodeHealth(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(health) != 1 || health[0].Node != "sim2" || health[0].Health != core.Unhealthy || !strings.HasPrefix(health[0].Reason, "IDLE+DRAIN: XID 79 [root@") {
			t.Errorf("health with sim2 drained: %+v", health)
		}
		c.Scontrol(t, "update", "NodeName=sim2", "State=RESUME")
		if health, err := be.NodeHealth(ctx); err != nil || len(health) != 0 {
			t.Errorf("health with sim2 resumed: %+v, %v", health, err)
		}
	})

	t.Run("a waiting block's reservation", func(t *testing.T) {
		b := block("cb-wait", hour.Add(3*time.Hour), hour.Add(5*time.Hour), "sim0", "sim1")
		for range 2 {
			if err := be.Reserve(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		want := shown{Nodes: "sim[0-1]", Start: b.Start, End: b.End, Users: "daemon,nobody", Accounts: "(null)", Flags: "IGNORE_JOBS,SPEC_NODES", State: "INACTIVE"}
		got, _ := reservation(t, c, b.ID)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after the purchase (-want +got):\n%s", diff)
		}
		// Extended, moved off a node, then its start: the end and the
		// nodes follow; the start and the users stay.
		b.End = b.End.Add(2 * time.Hour)
		if err := be.Reserve(ctx, b); err != nil {
			t.Fatal(err)
		}
		b.Placements[1].Node = "sim2"
		b.State = core.StateActive
		if err := be.Activate(ctx, b); err != nil {
			t.Fatal(err)
		}
		want.End, want.Nodes = b.End, "sim[0,2]"
		got, _ = reservation(t, c, b.ID)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after the extension and the replacement (-want +got):\n%s", diff)
		}
		for range 2 {
			if err := be.Release(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := reservation(t, c, b.ID); ok {
			t.Error("the reservation is still there after Release")
		}
	})

	t.Run("termination and release", func(t *testing.T) {
		b := block("cb-run", hour.Add(-time.Hour), time.Now().Add(2*time.Hour), "sim1")
		b.State = core.StateActive
		if err := be.Activate(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got, _ := reservation(t, c, b.ID); got.State != "ACTIVE" {
			t.Fatalf("a block activated after its start: reservation %+v, want ACTIVE", got)
		}
		// A job that ends on SIGTERM, one that ignores it, one waiting
		// for a later begin; all of the team's user.
		submit := func(args ...string) string {
			out, err := c.Run(ctx, "nobody", "sbatch", append([]string{"--parsable", "--reservation=" + b.ID, "--time=60", "--output=/dev/null"}, args...)...)
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(out))
		}
		// Each running one says, in its comment, when its trap is set.
		const ready = `scontrol update JobId=$SLURM_JOB_ID Comment=ready; `
		obeys := submit("--wrap", "trap 'exit 0' TERM; "+ready+"sleep 600 & wait")
		ignores := submit("--wrap", "trap '' TERM; "+ready+"sleep 600")
		waits := submit("--begin=now+1hour", "--wrap", "true")
		eventually(t, "both jobs run, their traps set", func() bool {
			return jobComment(t, c, obeys) == "ready" && jobComment(t, c, ignores) == "ready" && jobState(t, c, waits) == "PENDING"
		})
		clock.Set(time.Now())
		if err := be.Terminate(ctx, b); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the job that obeys SIGTERM ends", func() bool { return jobState(t, c, obeys) == "" })
		if got := jobState(t, c, waits); got != "" {
			t.Errorf("the pending job is %s after the termination, want cancelled", got)
		}
		end := jobEnd(t, c, ignores)
		if want := clock.Now().Add(time.Minute).Truncate(time.Second); !end.Equal(want) {
			t.Errorf("the job that ignores SIGTERM ends at %v, want at the end of the grace, %v", end, want)
		}
		// Again, later: nothing is signalled or moved twice.
		clock.Set(clock.Now().Add(5 * time.Second))
		if err := be.Terminate(ctx, b); err != nil {
			t.Fatal(err)
		}
		if again := jobEnd(t, c, ignores); !again.Equal(end) {
			t.Errorf("a second Terminate moved the job's end from %v to %v", end, again)
		}
		if err := be.Release(ctx, b); err != nil {
			t.Fatal(err)
		}
		if _, ok := reservation(t, c, b.ID); ok {
			t.Error("the reservation is still there after Release")
		}
		if got := jobState(t, c, ignores); got != "" {
			t.Errorf("the job that ignores SIGTERM is %s after Release, want gone", got)
		}
	})

	t.Run("blocks sharing a node", func(t *testing.T) {
		a := block("cb-half-a", hour.Add(2*time.Hour), hour.Add(4*time.Hour), "sim0")
		b := block("cb-half-b", hour.Add(2*time.Hour), hour.Add(4*time.Hour), "sim0")
		a.Placements[0].GPUs, b.Placements[0].GPUs = []int{0, 1, 2, 3}, []int{4, 5, 6, 7}
		for _, blk := range []core.Block{a, b} {
			if err := be.Reserve(ctx, blk); err != nil {
				t.Fatal(err)
			}
			if got, _ := reservation(t, c, blk.ID); !strings.Contains(got.Flags, "OVERLAP") {
				t.Errorf("%s holds half a node without OVERLAP: %+v", blk.ID, got)
			}
			t.Cleanup(func() { be.Release(context.Background(), blk) })
		}
	})

	t.Run("blocks swapping nodes", func(t *testing.T) {
		// A purchase's re-pack moves waiting blocks onto each other's
		// nodes; each move applies alone, the first while the other
		// block's reservation still holds the node.
		a := block("cb-swap-a", hour.Add(5*time.Hour), hour.Add(6*time.Hour), "sim1")
		b := block("cb-swap-b", hour.Add(5*time.Hour), hour.Add(6*time.Hour), "sim2")
		for _, blk := range []core.Block{a, b} {
			if err := be.Reserve(ctx, blk); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Release(context.Background(), blk) })
		}
		a.Placements[0].Node, b.Placements[0].Node = "sim2", "sim1"
		for _, blk := range []core.Block{a, b} {
			if err := be.Reserve(ctx, blk); err != nil {
				t.Fatalf("moving %s onto the node of the other block: %v", blk.ID, err)
			}
		}
		for _, want := range []struct{ id, node string }{{a.ID, "sim2"}, {b.ID, "sim1"}} {
			if got, _ := reservation(t, c, want.id); got.Nodes != want.node {
				t.Errorf("%s after the swap: %+v, want on %s", want.id, got, want.node)
			}
		}
	})

	t.Run("a reservation another replica made", func(t *testing.T) {
		// Reserve creates without reading first; Slurm refuses the create
		// of a reservation that exists (as an overlap with itself when
		// its nodes are the same), and Reserve then reads and updates it.
		other := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, Now: clock.Now})
		blk := block("cb-replica", hour.Add(7*time.Hour), hour.Add(8*time.Hour), "sim0")
		if err := be.Reserve(ctx, blk); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Release(context.Background(), blk) })
		if err := other.Reserve(ctx, blk); err != nil {
			t.Fatalf("reserving again, unchanged, from another backend: %v", err)
		}
		// Moved by the other (it never saw it: a create, refused, then a
		// read and an update), then back by the first (it made it: a read
		// and an update).
		for _, step := range []struct {
			be   *slurm.Backend
			node string
			end  time.Time
		}{{other, "sim1", hour.Add(9 * time.Hour)}, {be, "sim0", hour.Add(10 * time.Hour)}} {
			blk.Placements[0].Node, blk.End = step.node, step.end
			if err := step.be.Reserve(ctx, blk); err != nil {
				t.Fatalf("moving it to %s: %v", step.node, err)
			}
			if got, _ := reservation(t, c, blk.ID); got.Nodes != step.node || !got.End.Equal(step.end) {
				t.Errorf("after the move: %+v, want on %s until %s", got, step.node, step.end)
			}
		}
	})

	t.Run("refusals", func(t *testing.T) {
		// A node Slurm does not know: no retry mends it.
		err := be.Reserve(ctx, block("cb-nowhere", hour.Add(2*time.Hour), hour.Add(3*time.Hour), "nosuch"))
		if !errors.Is(err, backend.ErrPermanent) {
			t.Errorf("a reservation on an unknown node: %v, want ErrPermanent", err)
		}
		// Nodes another reservation holds: retried.
		c.Scontrol(t, "create", "reservation", "ReservationName=maintenance", "StartTime="+hour.Add(2*time.Hour).In(c.Location()).Format("2006-01-02T15:04:05"),
			"Duration=60", "Nodes=sim3", "Users=root")
		err = be.Reserve(ctx, block("cb-busy", hour.Add(2*time.Hour), hour.Add(3*time.Hour), "sim3"))
		if err == nil || errors.Is(err, backend.ErrPermanent) || !strings.Contains(err.Error(), "overlaps") {
			t.Errorf("a reservation on nodes held by another: %v, want a retryable overlap", err)
		}
		// A block whose window has passed holds nothing.
		if err := be.Activate(ctx, block("cb-past", hour.Add(-3*time.Hour), hour.Add(-time.Hour), "sim0")); err != nil {
			t.Fatal(err)
		}
		if _, ok := reservation(t, c, "cb-past"); ok {
			t.Error("a reservation was made for a block that has ended")
		}
	})

	t.Run("a team without Slurm users", func(t *testing.T) {
		b := block("cb-unmapped", hour.Add(6*time.Hour), hour.Add(7*time.Hour), "sim0")
		b.Team = "team-2"
		if err := be.Reserve(ctx, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Release(context.Background(), b) })
		if got, _ := reservation(t, c, b.ID); got.Users != "root" {
			t.Errorf("users of an unmapped team's reservation: %q, want the hold user root", got.Users)
		}
	})
}

// TestBackendSuite runs the suite every backend passes, on a cluster
// whose one node is n0, the suite's.
func TestBackendSuite(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{Prefix: "n"})
	backendtest.Exercise(t, func(t *testing.T) backend.Backend { return newBackend(t, c, slurm.Config{}) })
	if out := c.Scontrol(t, "--oneliner", "show", "reservations"); strings.Contains(out, "ReservationName=") {
		t.Errorf("reservations left after the suite released every block: %s", out)
	}
}

// TestNew: a missing slurm.conf or missing commands stop New with what
// is wrong; the zone of nodes without a zone feature is the cluster's
// name.
func TestNew(t *testing.T) {
	c := slurmtest.Start(t, slurmtest.Options{})
	if _, err := slurm.New(t.Context(), slurm.Config{Conf: c.Conf + ".missing"}, nil); err == nil || !strings.Contains(err.Error(), "reading Slurm's configuration") {
		t.Errorf("New with a missing slurm.conf: %v", err)
	}
	if _, err := slurm.New(t.Context(), slurm.Config{Conf: c.Conf, Bin: t.TempDir()}, nil); err == nil || !strings.Contains(err.Error(), "finding Slurm's scontrol") {
		t.Errorf("New without the commands: %v", err)
	}
	be := newBackend(t, c, slurm.Config{})
	if nodes, err := be.Inventory(t.Context()); err != nil || len(nodes) != 1 || nodes[0].Zone != c.Name {
		t.Errorf("inventory: %+v, %v; want one node in zone %s (the ClusterName)", nodes, err, c.Name)
	}
}

// jobState is a job's state, "" once it has left squeue's list.
func jobState(t *testing.T, c *slurmtest.Cluster, id string) string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "squeue", "--noheader", "--jobs="+id, "--format=%T")
	if err != nil && strings.Contains(err.Error(), "Invalid job id") {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(out))
	if !slices.Contains([]string{"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED"}, s) {
		return "" // ended, or ending
	}
	return s
}

// jobComment is a job's comment.
func jobComment(t *testing.T, c *slurmtest.Cluster, id string) string {
	t.Helper()
	out, err := c.Run(t.Context(), "", "squeue", "--noheader", "--jobs="+id, "--format=%k")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// jobEnd is a running job's expected end.
func jobEnd(t *testing.T, c *slurmtest.Cluster, id string) time.Time {
	t.Helper()
	out, err := c.Run(t.Context(), "", "squeue", "--noheader", "--jobs="+id, "--format=%e")
	if err != nil {
		t.Fatal(err)
	}
	end, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(string(out)), c.Location())
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// testClock is the backends' clock in TestBackend, moved by the test.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// eventually polls cond every 100 ms for at most 30 s: Slurm acts on
// jobs shortly after a command, not at once.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting until %s: not after 30s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
