package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"capblock/internal/store"
)

// Crash tests of grouped commits. A child process commits purchases
// (PurchaseChange) from many goroutines at once, so that its commits
// form groups, and says on its standard output what it sent and what
// was acknowledged; the test kills something in the middle of the
// burst (the child itself, or the database server under it) and then
// checks the store: every acknowledged purchase is stored whole, and
// every purchase stored was sent and is whole. A purchase in flight at
// the kill may be stored without its acknowledgement having been read.

// killWorkers is how many goroutines of the child commit at once.
const killWorkers = 32

// GroupKillChild is the child's body: killWorkers goroutines commit
// purchases to s, printing "sent i" before each and "acked i group n"
// after it, n being largest() then (the largest group the store's
// commits have formed). A commit that fails prints "failed i: error"
// (the database went away); the goroutine stops committing. It returns
// once every goroutine has stopped, which a child killed in the middle
// never reaches.
func GroupKillChild(s store.Full, largest func() int) {
	ctx := context.Background()
	var (
		out sync.Mutex
		wg  sync.WaitGroup
	)
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(os.Stdout, format, args...)
		out.Unlock()
	}
	for w := range killWorkers {
		wg.Go(func() {
			for k := 0; ; k++ {
				i := w + k*killWorkers
				say("sent %d\n", i)
				if err := s.Commit(ctx, PurchaseChange(i)); err != nil {
					say("failed %d: %s\n", i, strings.ReplaceAll(err.Error(), "\n", " "))
					return
				}
				say("acked %d group %d\n", i, largest())
			}
		})
	}
	wg.Wait()
}

// KillRecord is what a child of GroupKillChild said before and after
// the kill.
type KillRecord struct {
	Sent, Acked map[int]bool
	// Failed counts the commits that failed (after the database was
	// killed, all of them do).
	Failed int
	// Largest is the largest group an acknowledgement reported.
	Largest int
}

// ReadKillChild reads the lines of a child running GroupKillChild until
// it has acknowledged enough purchases, calls kill, then reads what the
// child still wrote (until its output ends) and returns it all. The
// caller waits for the child.
func ReadKillChild(t *testing.T, lines *bufio.Scanner, enough int, kill func()) KillRecord {
	t.Helper()
	r := KillRecord{Sent: map[int]bool{}, Acked: map[int]bool{}}
	read := func() bool {
		if !lines.Scan() {
			return false
		}
		f := strings.Fields(lines.Text())
		if len(f) < 2 {
			return true
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[1], ":"))
		if err != nil {
			return true
		}
		switch f[0] {
		case "sent":
			r.Sent[n] = true
		case "acked":
			r.Acked[n] = true
			if len(f) == 4 {
				g, _ := strconv.Atoi(f[3])
				r.Largest = max(r.Largest, g)
			}
		case "failed":
			r.Failed++
		}
		return true
	}
	for len(r.Acked) < enough && r.Failed == 0 && read() {
	}
	if len(r.Acked) < enough {
		t.Fatalf("the child acknowledged %d purchases (%d failed) before it ended, want %d", len(r.Acked), r.Failed, enough)
	}
	kill()
	for read() {
	}
	return r
}

// CheckAfterKill checks s, opened again after the kill, against what the
// child said: every acknowledged purchase is stored with its action,
// idempotency key and both events, and every block stored was sent.
func CheckAfterKill(t *testing.T, s store.Full, r KillRecord) {
	t.Helper()
	ctx := t.Context()
	if r.Largest < 2 {
		t.Errorf("the largest group the child saw had %d changes: its commits were not grouped", r.Largest)
	}
	blocks, err := s.ListBlocks(ctx, store.BlockFilter{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, b := range blocks {
		stored[b.ID] = true
	}
	for i := range r.Acked {
		if id := PurchaseChange(i).Insert[0].ID; !stored[id] {
			t.Errorf("purchase %d (%s) was acknowledged and is not stored", i, id)
		}
	}
	unacked := 0
	for _, b := range blocks {
		i, err := strconv.Atoi(strings.TrimPrefix(b.ID, "cb-"))
		if err != nil || !r.Sent[i] {
			t.Errorf("block %s is stored, and no purchase of it was sent", b.ID)
			continue
		}
		if !r.Acked[i] {
			unacked++
		}
		as, err := s.ActionsFor(ctx, b.ID)
		if err != nil || len(as) != 1 {
			t.Errorf("actions of %s: %v, %v; want its one action", b.ID, as, err)
		}
		rec := PurchaseChange(i).Idempotency[0]
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
	t.Logf("%d acknowledged, %d stored (%d in flight at the kill), %d failed after it, largest group %d",
		len(r.Acked), len(blocks), unacked, r.Failed, r.Largest)
}

// StartChild runs the test binary again as the child of test, with env
// set to value (the database the child writes to), and returns it and
// the lines it prints.
func StartChild(t *testing.T, test, env, value string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+value)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}
