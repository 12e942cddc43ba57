package slurm_test

import (
	"testing"
	"time"

	"capblock/internal/backend/slurm"
	"capblock/internal/slurmtest"
)

// TestReserveRemembered drives a real Slurm: a move of a reservation
// the backend wrote is one command, over either transport; a
// reservation changed or deleted behind the backend's back still ends
// as the block wants it.
func TestReserveRemembered(t *testing.T) {
	t.Setenv("TZ", slurmtest.DefaultTZ)
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 4})
	ctx := t.Context()
	hour := time.Now().UTC().Truncate(time.Hour)
	for _, transport := range []string{slurm.ScontrolSession, slurm.ScontrolProcess} {
		t.Run(transport, func(t *testing.T) {
			be := newBackend(t, c, slurm.Config{SoldModels: []string{"H100"}, Scontrol: transport})
			defer be.Close()
			b := block("cb-mem-"+transport, hour.Add(3*time.Hour), hour.Add(5*time.Hour), "sim0", "sim1")
			defer be.Release(ctx, b) //nolint:errcheck // the next test's nodes
			// reserve runs Reserve and says how many commands it took, and
			// checks the reservation then holds the block's nodes and window.
			reserve := func(what string, nodes string) int64 {
				t.Helper()
				before := be.Commands()
				if err := be.Reserve(ctx, b); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				got, ok := reservation(t, c, b.ID)
				if !ok || got.Nodes != nodes || !got.Start.Equal(b.Start) || !got.End.Equal(b.End) || got.Users != "daemon,nobody" {
					t.Errorf("%s: reservation %+v (found %v), want nodes %s, %s to %s", what, got, ok, nodes, b.Start, b.End)
				}
				return be.Commands() - before
			}

			if n := reserve("the purchase", "sim[0-1]"); n != 1 {
				t.Errorf("the purchase took %d commands, want 1", n)
			}
			b.Placements[1].Node = "sim2"
			if n := reserve("a move", "sim[0,2]"); n != 1 {
				t.Errorf("a move took %d commands, want 1", n)
			}
			b.Start, b.End = b.Start.Add(time.Hour), b.End.Add(time.Hour)
			b.Placements[0].Node = "sim3"
			if n := reserve("a move in time and nodes", "sim[2-3]"); n != 1 {
				t.Errorf("a move in time and nodes took %d commands, want 1", n)
			}

			// Changed behind the backend's back: the nodes are set again
			// whatever the backend remembers.
			c.Scontrol(t, "update", "ReservationName="+b.ID, "Nodes=sim0")
			reserve("a retry after a change by hand", "sim[2-3]")
			// Its window changed by hand, then a move: the update sent from
			// what the backend remembers leaves the window as changed, and
			// Activate's read repairs it.
			c.Scontrol(t, "update", "ReservationName="+b.ID, "EndTime="+b.End.Add(time.Hour).In(c.Location()).Format("2006-01-02T15:04:05"))
			b.Placements[0].Node = "sim1"
			if err := be.Activate(ctx, b); err != nil {
				t.Fatal(err)
			}
			if got, _ := reservation(t, c, b.ID); got.Nodes != "sim[1-2]" || !got.End.Equal(b.End) {
				t.Errorf("after Activate: reservation %+v, want nodes sim[1-2] to %s", got, b.End)
			}
			// Deleted behind its back: the update is refused, the backend
			// reads the reservation, finds none and creates it.
			c.Scontrol(t, "delete", "ReservationName="+b.ID)
			b.Placements[1].Node = "sim3"
			if n := reserve("a move after a deletion by hand", "sim[1,3]"); n != 3 {
				t.Errorf("a move after a deletion by hand took %d commands, want 3 (the refused update, a read, a create)", n)
			}
			if n := reserve("a retry", "sim[1,3]"); n != 1 {
				t.Errorf("a retry after the fallback took %d commands, want 1", n)
			}
			// Released, then bought again under the same name: a create.
			if err := be.Release(ctx, b); err != nil {
				t.Fatal(err)
			}
			if n := reserve("a purchase after a release", "sim[1,3]"); n != 1 {
				t.Errorf("a purchase after a release took %d commands, want 1", n)
			}
		})
	}
}
