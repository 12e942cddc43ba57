package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// gatedStore pauses the first GetBlock after it is armed, once it has
// read: the caller goes on with what it read only when resumed.
type gatedStore struct {
	store.Full
	mu     sync.Mutex
	armed  bool
	paused chan struct{}
	resume chan struct{}
}

func (g *gatedStore) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.paused, g.resume = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedStore) GetBlock(ctx context.Context, id string) (core.Block, error) {
	b, err := g.Full.GetBlock(ctx, id)
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.paused)
		<-g.resume
	}
	return b, err
}

// TestExtensionRacingACancel: an extension reads a movable whole-node
// block, a cancel of it commits on the same service, then the extension
// decides (its re-pack path: the hours after the block are taken on its
// node). The extension is refused, the service's lock is free (a
// purchase and a search answer at once after it), and the cancel holds.
// Before, the extension dereferenced the block the index no longer held:
// the panic left the lock held and every later request hung.
func TestExtensionRacingACancel(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "race.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// cb-a on n0 over hours 48-56, cb-b right after it on n0: extending
	// cb-a needs a re-pack. Both are far enough ahead to move.
	a, b := wholeNode("cb-a", "n0", 48, 56), wholeNode("cb-b", "n0", 56, 60)
	if err := st.Commit(ctx, store.Change{Insert: []core.Block{a, b}}); err != nil {
		t.Fatal(err)
	}
	f := planFleet()
	gate := &gatedStore{Full: st}
	svc, err := New(ctx, Config{Fleet: f, Store: gate, Clock: clock.NewSim(planT0), Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	offs, err := svc.ExtensionOfferings(ctx, "t", "cb-a", 2*time.Hour)
	if err != nil || len(offs) == 0 {
		t.Fatalf("extension offerings of cb-a: %v, %v", offs, err)
	}

	gate.arm()
	extended := make(chan error, 1)
	go func() {
		_, err := svc.Extend(ctx, "t", "cb-a", offs[0].ID)
		extended <- err
	}()
	<-gate.paused // the extension has read cb-a
	if _, err := svc.CancelBlock(ctx, "t", "cb-a"); err != nil {
		t.Fatalf("cancelling cb-a while its extension waits: %v", err)
	}
	close(gate.resume)
	select {
	case err := <-extended:
		if err == nil {
			t.Fatal("the extension of a block cancelled meanwhile succeeded")
		}
		if !errors.Is(err, core.ErrInvalidState) && !errors.Is(err, core.ErrConflict) {
			t.Logf("the extension was refused: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the extension did not answer in 10 s")
	}
	// The lock is free: a search answers at once.
	done := make(chan error, 1)
	go func() {
		_, err := svc.Offerings(ctx, core.SearchRequest{Types: []string{"h100.8x"}, Count: 1, Duration: 4 * time.Hour,
			StartAfter: planHour(60), EndBefore: planHour(80)})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("searching after the race: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a search after the race did not answer in 10 s: the service's lock is held")
	}
	got, err := st.GetBlock(ctx, "cb-a")
	if err != nil || got.State != core.StateCancelled || !got.End.Equal(a.End) {
		t.Fatalf("cb-a after the race: %+v, %v; want it cancelled, its end unchanged", got, err)
	}
}

// TestPanicFreesTheLock: a decision that panics under the service's lock
// leaves it free.
func TestPanicFreesTheLock(t *testing.T) {
	svc := newPlanEnv(t).svc
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the decision's panic did not reach the caller")
			}
		}()
		_ = svc.withLock(func() error { panic("a defect in a decision") })
	}()
	locked := make(chan struct{})
	go func() {
		svc.mu.Lock()
		svc.mu.Unlock()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock is still held after a decision panicked under it")
	}
}
