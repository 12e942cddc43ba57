package slurm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/slurm"
	"capblock/internal/core"
	"capblock/internal/slurmtest"
)

// convergePoll is the tests' poll: short, so that a repair comes fast.
const convergePoll = 50 * time.Millisecond

// TestConverge drives a real Slurm: at each poll the backend brings its
// blocks' reservations back to the desired state after changes by hand,
// leaves an operator's reservation and the unsettled blocks alone,
// deletes the reservation of a block no longer live once the grace has
// passed, and stops at Converge(nil) and at Close.
func TestConverge(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 4})
	clock := &testClock{now: time.Now()}
	be := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, ConvergePoll: convergePoll, Now: clock.Now})
	t.Cleanup(be.Close)
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	slurmTime := func(tm time.Time) string { return tm.In(c.Location()).Format("2006-01-02T15:04:05") }

	a := block("cb-conv-a", hour.Add(2*time.Hour), hour.Add(4*time.Hour), "sim0", "sim1")
	a.Version = 4
	if err := be.Reserve(ctx, a); err != nil {
		t.Fatal(err)
	}
	desired := &backend.Desired{Epoch: 1, At: clock.Now(), Blocks: []core.Block{a}}
	be.Converge(desired)

	// holds says whether a's reservation is as the block wants it.
	holds := func() bool {
		got, ok := reservation(t, c, a.ID)
		return ok && got.Nodes == "sim[0-1]" && got.Start.Equal(a.Start) && got.End.Equal(a.End) && got.Users == "daemon,nobody" &&
			recordedVersion(t, c, a.ID) == fmt.Sprintf("capblock:v=%d", a.Version)
	}
	eventually(t, "the block's reservation holds its nodes, window, users and version", holds)
	// Once it holds, a pass is one read and no write.
	commands, polls := be.Commands(), be.Polls()
	awaitPolls(t, be, 3)
	if n, p := be.Commands()-commands, be.Polls()-polls; n > p+1 {
		t.Errorf("%d commands in %d passes over a reservation that holds, want one read each", n, p)
	}

	t.Run("deleted by hand", func(t *testing.T) {
		c.Scontrol(t, "delete", "ReservationName="+a.ID)
		eventually(t, "the reservation deleted by hand is created again", holds)
	})

	t.Run("nodes and window changed by hand", func(t *testing.T) {
		c.Scontrol(t, "update", "ReservationName="+a.ID, "Nodes=sim2,sim3")
		eventually(t, "the reservation's nodes are the block's again", holds)
		c.Scontrol(t, "update", "ReservationName="+a.ID, "EndTime="+slurmTime(a.End.Add(time.Hour)))
		eventually(t, "the reservation's end is the block's again", holds)
	})

	t.Run("an operator's maintenance on the same nodes", func(t *testing.T) {
		c.Scontrol(t, "create", "reservation", "ReservationName=maint", "StartTime="+slurmTime(a.Start), "Duration=60",
			"Nodes=sim0,sim1", "Users=root", "Flags=MAINT,IGNORE_JOBS")
		t.Cleanup(func() { c.Run(context.Background(), "", "scontrol", "delete", "ReservationName=maint") })
		// Deleted by hand while the maintenance holds the nodes: created
		// again beside it.
		c.Scontrol(t, "delete", "ReservationName="+a.ID)
		eventually(t, "the reservation is created again beside the maintenance", holds)
		awaitPolls(t, be, 3)
		got, ok := reservation(t, c, "maint")
		if !ok || got.Nodes != "sim[0-1]" || !strings.Contains(got.Flags, "MAINT") || !got.Start.Equal(a.Start) {
			t.Errorf("the operator's maintenance after the repairs: %+v (found %v), want it untouched on sim[0-1]", got, ok)
		}
	})

	t.Run("a block no longer live", func(t *testing.T) {
		gone := block("cb-conv-gone", hour.Add(5*time.Hour), hour.Add(6*time.Hour), "sim2")
		gone.Version = 2
		if err := be.Reserve(ctx, gone); err != nil {
			t.Fatal(err)
		}
		// One capblock did not write so (no version recorded): deleted at
		// once. The other stays unknown for the grace first: the clock has
		// not moved, so it is still there when the first is gone.
		c.Scontrol(t, "create", "reservation", "ReservationName=cb-conv-byhand", "StartTime="+slurmTime(hour.Add(5*time.Hour)),
			"Duration=60", "Nodes=sim3", "Users=root")
		eventually(t, "the reservation without a version is deleted", func() bool {
			_, ok := reservation(t, c, "cb-conv-byhand")
			return !ok
		})
		awaitPolls(t, be, 3)
		if _, ok := reservation(t, c, gone.ID); !ok {
			t.Fatal("the reservation of a block unknown to the desired state was deleted before the grace")
		}
		clock.Set(clock.Now().Add(backend.UnknownGrace))
		eventually(t, "the reservation of the block no longer live is deleted after the grace", func() bool {
			_, ok := reservation(t, c, gone.ID)
			return !ok
		})
		if !holds() {
			t.Error("the live block's reservation changed meanwhile")
		}
	})

	t.Run("unsettled blocks are left alone", func(t *testing.T) {
		moving := block("cb-conv-moving", hour.Add(7*time.Hour), hour.Add(8*time.Hour), "sim2")
		bought := block("cb-conv-bought", hour.Add(7*time.Hour), hour.Add(8*time.Hour), "sim3")
		for _, blk := range []core.Block{moving, bought} {
			if err := be.Reserve(ctx, blk); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { be.Release(ctx, blk) })
		}
		be.Converge(&backend.Desired{Epoch: 1, At: clock.Now(), Blocks: []core.Block{a, moving}, Unsettled: []string{moving.ID, bought.ID}})
		t.Cleanup(func() { be.Converge(desired) })
		c.Scontrol(t, "update", "ReservationName="+moving.ID, "Nodes=sim1")
		clock.Set(clock.Now().Add(backend.UnknownGrace))
		awaitPolls(t, be, 3)
		if got, _ := reservation(t, c, moving.ID); got.Nodes != "sim1" {
			t.Errorf("an unsettled block's reservation changed by hand: %+v, want it left on sim1", got)
		}
		if _, ok := reservation(t, c, bought.ID); !ok {
			t.Error("the reservation of an unsettled block unknown to the desired state was deleted")
		}
	})

	t.Run("a desired state older than the reservation", func(t *testing.T) {
		// Version 5 applied by another process, by an action that the
		// leader's index has not caught up with: the passes leave it be,
		// quietly, and from the first of them the converging process
		// refuses version 4 too, though it wrote it last.
		other := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, Now: clock.Now})
		a5 := a
		a5.Version, a5.End = 5, a.End.Add(time.Hour)
		if err := other.Reserve(ctx, a5); err != nil {
			t.Fatal(err)
		}
		before := be.StaleWrites()
		awaitPolls(t, be, 3)
		if got, _ := reservation(t, c, a.ID); !got.End.Equal(a5.End) || recordedVersion(t, c, a.ID) != "capblock:v=5" {
			t.Errorf("after the passes: reservation %+v, version %q; want version 5's end %s, capblock:v=5", got, recordedVersion(t, c, a.ID), a5.End)
		}
		if n := be.StaleWrites() - before; n != 0 {
			t.Errorf("%d stale writes counted by the passes, want none: a lagging desired state is no write", n)
		}
		if err := be.Reserve(ctx, a); err != nil || be.StaleWrites()-before != 1 {
			t.Errorf("a reserve of version 4 after version 5: %v, %d stale writes counted, want nil and 1", err, be.StaleWrites()-before)
		}
		// The index catches up.
		a = a5
		desired = &backend.Desired{Epoch: 1, At: clock.Now(), Blocks: []core.Block{a}}
		be.Converge(desired)
		eventually(t, "the reservation holds version 5", holds)
	})

	t.Run("Converge(nil) stops the repairs", func(t *testing.T) {
		be.Converge(nil)
		c.Scontrol(t, "delete", "ReservationName="+a.ID)
		before := be.Polls()
		// Nothing to wait for: a stopped loop gives no sign. Several polls'
		// time passes, and no pass, nor repair, may have run.
		time.Sleep(5 * convergePoll)
		if _, ok := reservation(t, c, a.ID); ok || be.Polls() != before {
			t.Errorf("after Converge(nil): the reservation deleted by hand is back (%v), or passes ran (%d)", ok, be.Polls()-before)
		}
		be.Converge(desired)
		eventually(t, "converging again repairs the reservation", holds)
	})

	t.Run("Close stops the repairs", func(t *testing.T) {
		other := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, ConvergePoll: convergePoll, Now: clock.Now})
		be.Converge(nil)
		other.Converge(desired)
		awaitPolls(t, other, 1)
		other.Close()
		c.Scontrol(t, "delete", "ReservationName="+a.ID)
		before := other.Polls()
		time.Sleep(5 * convergePoll)
		if _, ok := reservation(t, c, a.ID); ok || other.Polls() != before {
			t.Errorf("after Close: the reservation deleted by hand is back (%v), or passes ran (%d)", ok, other.Polls()-before)
		}
		other.Converge(desired) // closed: starts nothing
		time.Sleep(2 * convergePoll)
		if other.Polls() != before {
			t.Error("Converge after Close started the loop again")
		}
		be.Converge(desired)
		eventually(t, "the first backend repairs it again", holds)
	})
}

// awaitPolls waits until be has run n more convergence passes.
func awaitPolls(t *testing.T, be *slurm.Backend, n int64) {
	t.Helper()
	want := be.Polls() + n
	eventually(t, "the convergence has run its passes", func() bool { return be.Polls() >= want })
}
