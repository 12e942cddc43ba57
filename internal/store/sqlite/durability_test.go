package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/storetest"
)

// childDBEnv names the database that the child process of
// TestKillDuringCommits writes to.
const childDBEnv = "CAPBLOCK_SQLITE_KILL_CHILD_DB"

// TestKillDuringCommits kills (SIGKILL) a process in the middle of a stream
// of purchases and checks that every purchase it acknowledged is stored
// whole, its engine action included, and that no purchase is stored in
// part.
func TestKillDuringCommits(t *testing.T) {
	if path := os.Getenv(childDBEnv); path != "" {
		commitUntilKilled(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "capblock.db")
	cmd, lines := storetest.StartChild(t, "TestKillDuringCommits", childDBEnv, path)
	// 1. Read acknowledgements until enough purchases are in, then kill.
	const enough = 300
	acked := -1
	for acked < enough && lines.Scan() {
		if n, ok := strings.CutPrefix(lines.Text(), "acked "); ok {
			acked, _ = strconv.Atoi(n)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("killing child: %v", err)
	}
	cmd.Wait()
	if acked < enough {
		t.Fatalf("child acknowledged %d purchases before it ended, want %d", acked+1, enough)
	}

	// 2. Every acknowledged purchase is there, with its ledger entry,
	//    idempotency key, events and action; nothing is there in part.
	s := openTemp(t, path)
	blocks, err := s.ListBlocks(t.Context(), store.BlockFilter{})
	if err != nil {
		t.Fatalf("ListBlocks: %v", err)
	}
	if len(blocks) < acked+1 {
		t.Fatalf("%d blocks stored after the crash, want at least the %d acknowledged", len(blocks), acked+1)
	}
	events, err := s.Events(t.Context(), "", 0, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(events) != 2*len(blocks) {
		t.Errorf("%d events for %d blocks, want 2 per block", len(events), len(blocks))
	}
	for i := range blocks {
		want := storetest.PurchaseChange(i)
		b := want.Insert[0]
		if blocks[i].ID != b.ID {
			t.Fatalf("block %d is %s, want %s", i, blocks[i].ID, b.ID)
		}
		rec := want.Idempotency[0]
		if _, err := s.Idempotency(t.Context(), rec.Team, rec.ClientToken); err != nil {
			t.Errorf("idempotency key of %s: %v", b.ID, err)
		}
		as, err := s.ActionsFor(t.Context(), b.ID)
		if err != nil {
			t.Fatalf("ActionsFor: %v", err)
		}
		if len(as) != 1 || as[0].ID != want.Actions[0].ID || as[0].State != core.ActionPending {
			t.Errorf("actions of %s: %+v, want its pending %s", b.ID, as, want.Actions[0].ID)
		}
	}
	if pending, _, err := s.ActionCounts(t.Context()); err != nil || pending != int64(len(blocks)) {
		t.Errorf("ActionCounts: %d pending, %v; want one per block, %d", pending, err, len(blocks))
	}
	var entries int
	for team := range 20 {
		ledger, err := s.Ledger(t.Context(), fmt.Sprintf("team-%d", team))
		if err != nil {
			t.Fatalf("Ledger: %v", err)
		}
		entries += len(ledger)
	}
	if entries != len(blocks) {
		t.Errorf("%d ledger entries for %d blocks, want one each", entries, len(blocks))
	}
}

// commitUntilKilled is the child: it commits purchases one by one and
// prints "acked i" after Commit of purchase i returns.
func commitUntilKilled(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		if err := s.Commit(ctx, storetest.PurchaseChange(i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stdout, "acked %d\n", i)
	}
}
