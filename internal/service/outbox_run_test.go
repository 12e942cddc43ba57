package service

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"capblock/internal/backend"
	"capblock/internal/backend/local"
	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// The tests of the outbox worker as Run starts it: what wakes it.

// finishes is a store that sends the id of each action it records done.
type finishes struct {
	store.Full
	done chan string
}

func (f finishes) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	changed, err := f.Full.FinishAction(ctx, epoch, id, at)
	if err == nil {
		f.done <- id
	}
	return changed, err
}

// waitDone waits for the action id to be recorded done.
func waitDone(t *testing.T, done <-chan string, id string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-done:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("action %s was not done within 10s", id)
		}
	}
}

// TestOutboxWakesOnCommit: the leader's worker applies an action as soon
// as a commit of this process stores it, though it would look on its
// own only an hour later; and it stops with Run.
func TestOutboxWakesOnCommit(t *testing.T) {
	pe := newPlanEnv(t, wholeNode("cb-a", "n0", 2, 10), wholeNode("cb-b", "n1", 2, 10))
	st := finishes{Full: pe.st, done: make(chan string, 16)}
	svc, err := New(t.Context(), Config{Fleet: pe.svc.fleet, Store: st, Backend: local.NewSim(slog.New(slog.DiscardHandler), pe.svc.fleet.Nodes),
		Clock: pe.sim, Log: slog.New(slog.DiscardHandler), Outbox: OutboxOptions{Poll: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := runService(t, svc)
	for _, id := range []string{"cb-a", "cb-b"} {
		b, err := svc.CancelBlock(ctx, "t", id)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, st.done, fmt.Sprintf("ac-%s-%d-release", id, b.Version))
	}
}

// TestOutboxPollsWithoutKick: a worker that no commit wakes finds the
// due actions at its next look.
func TestOutboxPollsWithoutKick(t *testing.T) {
	pe := newPlanEnv(t)
	st := finishes{Full: pe.st, done: make(chan string, 16)}
	svc, err := New(t.Context(), Config{Fleet: pe.svc.fleet, Store: st, Backend: local.NewSim(slog.New(slog.DiscardHandler), pe.svc.fleet.Nodes),
		Clock: pe.sim, Log: slog.New(slog.DiscardHandler), Outbox: OutboxOptions{Poll: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := runService(t, svc)
	// Stored by a commit of another process: nothing here kicks.
	a := core.Action{ID: "ac-x", Kind: core.ActionRelease, Subject: "cb-x", Team: "t", Payload: backend.EncodeBlock(core.Block{ID: "cb-x"})}
	if err := pe.st.Commit(ctx, store.Change{Actions: []core.Action{a}}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, st.done, "ac-x")
}

// sharedFinishes is finishes on PostgreSQL, which replicas share: its
// watch and lead stay those of the store.
type sharedFinishes struct {
	*postgres.Store
	done chan string
}

func (f sharedFinishes) FinishAction(ctx context.Context, epoch int64, id string, at time.Time) (bool, error) {
	changed, err := f.Store.FinishAction(ctx, epoch, id, at)
	if err == nil {
		f.done <- id
	}
	return changed, err
}

// TestOutboxWakesOnOtherReplicasCommit: on a shared store, the leader's
// worker applies an action that another replica's commit stored as soon
// as the notice of that commit comes, though it would look on its own
// only an hour later.
func TestOutboxWakesOnOtherReplicasCommit(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(), open()
	if err := stA.Commit(t.Context(), store.Change{Insert: []core.Block{wholeNode("cb-a", "n0", 2, 10)}}); err != nil {
		t.Fatal(err)
	}
	fl := newPlanEnv(t).svc.fleet
	sim := func() *clock.Sim { return clock.NewSim(planT0) }
	leaderStore := sharedFinishes{Store: stA, done: make(chan string, 16)}
	leader, err := New(t.Context(), Config{Fleet: fl, Store: leaderStore, Backend: local.NewSim(slog.New(slog.DiscardHandler), fl.Nodes),
		Clock: sim(), Log: slog.New(slog.DiscardHandler), Outbox: OutboxOptions{Poll: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(t.Context(), Config{Fleet: fl, Store: stB, Clock: sim(), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := runService(t, leader)
	for deadline := time.Now().Add(10 * time.Second); !leader.Leading(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service never took the lead")
		}
	}
	b, err := other.CancelBlock(ctx, "t", "cb-a")
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, leaderStore.done, fmt.Sprintf("ac-cb-a-%d-release", b.Version))
}
