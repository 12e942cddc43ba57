package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"capblock/internal/store"
	"capblock/internal/store/storetest"
)

// TestGroupFailsAlone: in one group, a change that fails its re-check
// fails alone (see storetest.GroupFailsAlone).
func TestGroupFailsAlone(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	storetest.GroupFailsAlone(t, s, s.commitGroup)
}

// TestConcurrentCommitsGroup: commits made at once share transactions,
// and each gets its own answer (see storetest.ConcurrentCommitsGroup).
func TestConcurrentCommitsGroup(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	storetest.ConcurrentCommitsGroup(t, s, s.group.Largest)
}

// groupChildEnv names the database the child of
// TestKillDuringGroupedCommits writes to.
const groupChildEnv = "CAPBLOCK_SQLITE_GROUP_KILL_CHILD_DB"

// TestKillDuringGroupedCommits kills (SIGKILL) a process in the middle
// of a burst of purchases from 32 goroutines, committed in groups:
// every purchase it acknowledged is stored whole, and every purchase
// stored was sent and is whole (one in flight at the kill may be stored
// unacknowledged).
func TestKillDuringGroupedCommits(t *testing.T) {
	if path := os.Getenv(groupChildEnv); path != "" {
		commitGroupsUntilKilled(path)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "capblock.db")
	cmd, lines := startChild(t, "TestKillDuringGroupedCommits", groupChildEnv, path)
	const enough = 2000
	acked, sent := map[int]bool{}, map[int]bool{}
	largest := 0
	for len(acked) < enough && lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "sent":
			sent[n] = true
		case "acked":
			acked[n] = true
			if len(f) == 4 {
				g, _ := strconv.Atoi(f[3])
				largest = max(largest, g)
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // what the child wrote before it died
		f := strings.Fields(lines.Text())
		if len(f) >= 2 && f[0] == "sent" {
			n, _ := strconv.Atoi(f[1])
			sent[n] = true
		}
	}
	cmd.Wait()
	if len(acked) < enough {
		t.Fatalf("the child acknowledged %d purchases before it ended, want %d", len(acked), enough)
	}
	if largest < 2 {
		t.Errorf("the largest group the child saw had %d changes: its commits were not grouped", largest)
	}
	s := openTemp(t, path)
	ctx := t.Context()
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, b := range blocks {
		stored[b.ID] = true
	}
	for i := range acked {
		if id := storetest.PurchaseChange(i).Insert[0].ID; !stored[id] {
			t.Errorf("purchase %d (%s) was acknowledged and is not stored", i, id)
		}
	}
	unacked := 0
	for _, b := range blocks {
		i, err := strconv.Atoi(strings.TrimPrefix(b.ID, "cb-"))
		if err != nil || !sent[i] {
			t.Errorf("block %s is stored, and no purchase of it was sent", b.ID)
			continue
		}
		if !acked[i] {
			unacked++
		}
		as, err := s.ActionsFor(ctx, b.ID)
		if err != nil || len(as) != 1 {
			t.Errorf("actions of %s: %v, %v; want its one action", b.ID, as, err)
		}
		rec := storetest.PurchaseChange(i).Idempotency[0]
		if _, err := s.Idempotency(ctx, rec.Team, rec.ClientToken); err != nil {
			t.Errorf("idempotency key of %s: %v", b.ID, err)
		}
	}
	events, err := s.Events(ctx, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2*len(blocks) {
		t.Errorf("%d events for %d blocks, want 2 a block: a purchase stored in part", len(events), len(blocks))
	}
	t.Logf("%d acknowledged, %d stored (%d in flight at the kill), largest group %d", len(acked), len(blocks), unacked, largest)
}

// commitGroupsUntilKilled is the child: 32 goroutines commit purchases,
// printing "sent i" before each and "acked i group n" after, n the
// largest group so far.
func commitGroupsUntilKilled(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(os.Stdout, format, args...)
		out.Unlock()
	}
	const workers = 32
	for w := range workers {
		go func() {
			for k := 0; ; k++ {
				i := w + k*workers
				say("sent %d\n", i)
				if err := s.Commit(ctx, storetest.PurchaseChange(i)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				largest := s.group.Largest()
				say("acked %d group %d\n", i, largest)
			}
		}()
	}
	select {}
}
