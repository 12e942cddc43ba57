package slurm_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"capblock/internal/backend/slurm"
	"capblock/internal/slurmtest"
)

// TestScontrol runs the reservation commands on a real Slurm as the
// backend runs them, in a session and in a process each: create,
// update, show and delete; a refused command's error is its own, and
// the next command's answer is its own too.
func TestScontrol(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	for _, via := range []string{slurm.ScontrolSession, slurm.ScontrolProcess} {
		t.Run(via, func(t *testing.T) {
			be := newBackend(t, c, slurm.Config{Scontrol: via})
			t.Cleanup(be.Close)
			if got := len(be.SessionPIDs()); (via == slurm.ScontrolSession) != (got > 0) {
				t.Fatalf("%s: %d sessions run", via, got)
			}
			ctx := t.Context()
			name := "t-" + via
			start := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04:05")
			create := []string{"create", "reservation", "ReservationName=" + name, "StartTime=" + start, "Duration=60",
				"Nodes=" + c.Nodes[0], "Users=nobody"}
			if _, err := be.Scontrol(ctx, create...); err != nil {
				t.Fatal(err)
			}
			if res, ok := reservation(t, c, name); !ok || res.Nodes != c.Nodes[0] {
				t.Fatalf("after the create, Slurm shows %+v, %v", res, ok)
			}

			// The same again overlaps itself: refused, with Slurm's
			// words, and the next command answers for itself.
			_, err := be.Scontrol(ctx, create...)
			if err == nil || !strings.Contains(err.Error(), "overlaps with another reservation") {
				t.Fatalf("creating %s twice: %v, want Slurm's overlap refusal", name, err)
			}
			out, err := be.Scontrol(ctx, "show", "reservation", name)
			if err != nil {
				t.Fatalf("the command after a refused one: %v", err)
			}
			if !strings.HasPrefix(out, "ReservationName="+name+" ") || strings.Count(out, "\n") != 1 || strings.Contains(out, "overlaps") {
				t.Fatalf("show after a refused create printed %q, want the one record of %s", out, name)
			}

			if _, err := be.Scontrol(ctx, "update", "ReservationName="+name, "Nodes="+c.Nodes[1]); err != nil {
				t.Fatal(err)
			}
			if res, _ := reservation(t, c, name); res.Nodes != c.Nodes[1] {
				t.Fatalf("after the update, Slurm shows nodes %q, want %q", res.Nodes, c.Nodes[1])
			}
			_, err = be.Scontrol(ctx, "update", "ReservationName=no-such", "Nodes="+c.Nodes[1])
			if err == nil || !strings.Contains(err.Error(), "Requested reservation is invalid") {
				t.Fatalf("updating a reservation that does not exist: %v", err)
			}
			_, err = be.Scontrol(ctx, "show", "reservation", "no-such")
			if err == nil || !strings.Contains(err.Error(), "Reservation no-such not found") {
				t.Fatalf("showing a reservation that does not exist: %v", err)
			}

			if _, err := be.Scontrol(ctx, "delete", "ReservationName="+name); err != nil {
				t.Fatal(err)
			}
			if res, ok := reservation(t, c, name); ok {
				t.Fatalf("after the delete, Slurm shows %+v", res)
			}
			_, err = be.Scontrol(ctx, "delete", "ReservationName="+name)
			if err == nil || !strings.Contains(err.Error(), "Requested reservation is invalid") {
				t.Fatalf("deleting %s again: %v", name, err)
			}
		})
	}
}

// TestSessionRestarts: a session whose scontrol was killed, or hangs,
// is replaced; the command it hung on is reported failed, and the next
// one runs.
func TestSessionRestarts(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	be := newBackend(t, c, slurm.Config{Sessions: 1, CommandTimeout: 3 * time.Second})
	t.Cleanup(be.Close)
	ctx := t.Context()
	show := func() error {
		out, err := be.Scontrol(ctx, "show", "reservation", "no-such")
		if err == nil || !strings.Contains(err.Error(), "not found") {
			return fmt.Errorf("showing a reservation that does not exist: %q, %v", out, err)
		}
		return nil
	}

	// Killed while idle: the next command runs in a new scontrol.
	pids := be.SessionPIDs()
	if len(pids) != 1 {
		t.Fatalf("%d sessions, want 1", len(pids))
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); slices.Contains(be.SessionPIDs(), pids[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("scontrol %d still runs after SIGKILL", pids[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := show(); err != nil {
		t.Fatalf("after its scontrol was killed: %v", err)
	}
	next := be.SessionPIDs()
	if len(next) != 1 || next[0] == pids[0] {
		t.Fatalf("sessions %v after killing %d, want one new one", next, pids[0])
	}

	// Hung (stopped): the command fails after CommandTimeout, saying
	// it may have applied, and the next runs in a new scontrol.
	if err := syscall.Kill(next[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04:05")
	_, err := be.Scontrol(ctx, "create", "reservation", "ReservationName=hung", "StartTime="+start, "Duration=60",
		"Nodes="+c.Nodes[0], "Users=nobody")
	if err == nil || !strings.Contains(err.Error(), "may have applied") {
		t.Fatalf("a command in a hung scontrol: %v, want it failed, saying it may have applied", err)
	}
	if slices.Contains(be.SessionPIDs(), next[0]) {
		t.Fatalf("the hung scontrol %d still runs", next[0])
	}
	if err := show(); err != nil {
		t.Fatalf("after a hung scontrol: %v", err)
	}
	if got := be.SessionPIDs(); len(got) != 1 || got[0] == next[0] {
		t.Fatalf("sessions %v after killing the hung %d, want one new one", got, next[0])
	}

	// Closed: its sessions end, and commands run a process each.
	be.Close()
	if got := be.SessionPIDs(); len(got) != 0 {
		t.Fatalf("sessions %v after Close", got)
	}
	if err := show(); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

// TestSessionsConcurrent: commands from many goroutines at once, over a
// pool of 3 sessions, each get their own answer.
func TestSessionsConcurrent(t *testing.T) {
	t.Parallel()
	c := slurmtest.Start(t, slurmtest.Options{Nodes: 2})
	be := newBackend(t, c, slurm.Config{Sessions: 3})
	t.Cleanup(be.Close)
	ctx := t.Context()
	base := time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 12 {
		wg.Go(func() {
			for i := range 4 {
				name := fmt.Sprintf("c-%d-%d", g, i)
				// Every other one is refused: the same name twice.
				start := base.Add(time.Duration(g*4+i) * time.Hour).Format("2006-01-02T15:04:05")
				create := []string{"create", "reservation", "ReservationName=" + name, "StartTime=" + start, "Duration=60",
					"Nodes=" + c.Nodes[g%2], "Users=nobody"}
				if _, err := be.Scontrol(ctx, create...); err != nil {
					errs <- err
					return
				}
				if _, err := be.Scontrol(ctx, create...); err == nil || !strings.Contains(err.Error(), "overlaps") {
					errs <- fmt.Errorf("%s created twice: %v", name, err)
					return
				}
				out, err := be.Scontrol(ctx, "show", "reservation", name)
				if err != nil {
					errs <- err
					return
				}
				if !strings.HasPrefix(out, "ReservationName="+name+" ") || strings.Count(out, "\n") != 1 {
					errs <- fmt.Errorf("show reservation %s printed %q", name, out)
					return
				}
				if _, err := be.Scontrol(ctx, "delete", "ReservationName="+name); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(be.SessionPIDs()); got < 1 || got > 3 {
		t.Errorf("%d sessions ran, want 1 to 3", got)
	}
}
