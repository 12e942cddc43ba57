package sqlite

import (
	"context"
	"errors"
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

// request is a commit request for c, as Commit makes it.
func request(t *testing.T, ctx context.Context, c store.Change) *commitRequest {
	t.Helper()
	data, err := store.EncodeEvents(c.Events)
	if err != nil {
		t.Fatal(err)
	}
	used, err := store.UsedOfferings(c.Offerings)
	if err != nil {
		t.Fatal(err)
	}
	return &commitRequest{ctx: ctx, c: c, data: data, used: used, wake: make(chan struct{}, 1)}
}

// TestGroupFailsAlone: in one group, a change that fails its re-check
// (its block overlaps one committed before it in the group; its client
// token is one used before it in the group; its caller gave up) fails
// alone; the others commit, each whole, and the failed ones leave
// nothing.
func TestGroupFailsAlone(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	ctx := t.Context()
	overlapping := storetest.PurchaseChange(0)
	overlapping.Insert[0].ID = "cb-overlap" // the GPUs and hours of purchase 0
	overlapping.Idempotency[0].ClientToken, overlapping.Idempotency[0].Subject = "tok-overlap", "cb-overlap"
	overlapping.Offerings = nil
	for i := range overlapping.Events {
		overlapping.Events[i].ID += "-overlap"
		overlapping.Events[i].Subject = "cb-overlap"
	}
	overlapping.Journals = nil
	overlapping.Actions[0].ID, overlapping.Actions[0].Subject = "act-overlap", "cb-overlap"
	sameToken := storetest.PurchaseChange(2)
	sameToken.Idempotency[0].ClientToken = storetest.PurchaseChange(1).Idempotency[0].ClientToken
	sameToken.Idempotency[0].Team = storetest.PurchaseChange(1).Idempotency[0].Team
	gone, cancel := context.WithCancel(ctx)
	cancel()
	batch := []*commitRequest{
		request(t, ctx, storetest.PurchaseChange(0)),
		request(t, ctx, overlapping),
		request(t, ctx, storetest.PurchaseChange(1)),
		request(t, ctx, sameToken),
		request(t, gone, storetest.PurchaseChange(3)),
		request(t, ctx, storetest.PurchaseChange(4)),
	}
	s.commitGroup(batch)
	for i, want := range []string{"", "conflict", "", "conflict", "canceled", ""} {
		err := batch[i].err
		switch {
		case want == "" && err != nil:
			t.Errorf("change %d of the group: %v; want it committed", i, err)
		case want == "conflict" && !store.IsConflict(err):
			t.Errorf("change %d of the group: %v; want a conflict", i, err)
		case want == "canceled" && !errors.Is(err, context.Canceled):
			t.Errorf("change %d of the group: %v; want its caller's cancellation", i, err)
		}
	}
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range blocks {
		ids = append(ids, b.ID)
	}
	if got, want := strings.Join(ids, " "), "cb-00000000 cb-00000001 cb-00000004"; got != want {
		t.Errorf("blocks stored: %s; want %s", got, want)
	}
	events, err := s.Events(ctx, "", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 6 {
		t.Errorf("%d events stored, want the 6 of the three committed changes", len(events))
	}
	if pending, _, err := s.ActionCounts(ctx); err != nil || pending != 3 {
		t.Errorf("ActionCounts: %d pending, %v; want the 3 of the committed changes", pending, err)
	}
	if _, err := s.Idempotency(ctx, sameToken.Idempotency[0].Team, sameToken.Idempotency[0].ClientToken); err != nil {
		t.Errorf("the client token of change 2: %v", err)
	}
}

// TestConcurrentCommitsGroup: commits made at once share transactions,
// and each gets its own answer: of 64 purchases, 32 of them taking the
// GPUs and hours of another, exactly one of each pair commits.
func TestConcurrentCommitsGroup(t *testing.T) {
	s := openTemp(t, filepath.Join(t.TempDir(), "capblock.db"))
	ctx := t.Context()
	const pairs = 32
	errs := make([]error, 2*pairs)
	var wg sync.WaitGroup
	for i := range 2 * pairs {
		wg.Go(func() {
			c := storetest.PurchaseChange(i % pairs)
			if i >= pairs { // its twin: the same GPUs and hours, another block
				id := fmt.Sprintf("cb-twin-%d", i)
				c.Insert[0].ID = id
				c.Idempotency[0].ClientToken, c.Idempotency[0].Subject = "tok-"+id, id
				c.Offerings = nil
				for k := range c.Events {
					c.Events[k].ID += "-twin"
					c.Events[k].Subject = id
				}
				c.Journals = nil
				c.Actions[0].ID, c.Actions[0].Subject = "act-"+id, id
			}
			errs[i] = s.Commit(ctx, c)
		})
	}
	wg.Wait()
	for i := range pairs {
		a, b := errs[i], errs[i+pairs]
		if (a == nil) == (b == nil) || (a != nil && !store.IsConflict(a)) || (b != nil && !store.IsConflict(b)) {
			t.Errorf("purchase %d and its twin: %v and %v; want one committed and one conflict", i, a, b)
		}
	}
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != pairs {
		t.Errorf("%d blocks stored, want %d", len(blocks), pairs)
	}
	s.group.mu.Lock()
	largest := s.group.largest
	s.group.mu.Unlock()
	t.Logf("the largest group: %d changes", largest)
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
				s.group.mu.Lock()
				largest := s.group.largest
				s.group.mu.Unlock()
				say("acked %d group %d\n", i, largest)
			}
		}()
	}
	select {}
}
