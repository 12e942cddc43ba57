package service

import (
	"testing"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// TestNoticeNewerThanASettle: this replica extends block X (version 2);
// another cancels it (version 3), and the notice of that cancel reaches
// this replica before its own extension settles. The index must not
// take X back at version 2: before, the settle re-added it as
// scheduled, and the replica offered less capacity than was free until
// it restarted.
func TestNoticeNewerThanASettle(t *testing.T) {
	x := wholeNode("cb-x", "n0", 48, 56)
	e := newPlanEnv(t, x)
	s, ctx := e.svc, t.Context()
	stored, err := e.st.GetBlock(ctx, "cb-x")
	if err != nil {
		t.Fatal(err)
	}
	// 1. This replica decides the extension, and commits it.
	ext := stored
	ext.End = ext.End.Add(2 * time.Hour)
	c := store.Change{Update: []store.BlockUpdate{{Block: ext, ExpectedVersion: stored.Version, Replace: true}}}
	if err := s.withLock(func() error { return s.assumeChange(c) }); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Commit(ctx, c); err != nil {
		t.Fatal(err)
	}
	// 2. Another replica cancels X, and its notice arrives first.
	cancelled := ext
	cancelled.State = core.StateCancelled
	if err := e.st.Commit(ctx, store.Change{Update: []store.BlockUpdate{{Block: cancelled, ExpectedVersion: stored.Version + 1}}}); err != nil {
		t.Fatal(err)
	}
	s.applyNotice(ctx, store.BlockVersion{ID: "cb-x", Version: stored.Version + 2})
	// 3. This replica's extension settles.
	s.settle(changeKey(c), c, nil)
	s.mu.RLock()
	got, held := s.index.Block("cb-x")
	s.mu.RUnlock()
	if held {
		t.Fatalf("the index holds cb-x at version %d (%s) after the notice of its cancel (version %d)", got.Version, got.State, stored.Version+2)
	}
}
