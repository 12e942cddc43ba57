package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
	"capblock/internal/store/pgtest"
)

// TestWatchBlocks follows commits and barriers through a watch: each
// commit's blocks at the versions it left, in commit order, and a
// barrier after the commits that ended before it.
func TestWatchBlocks(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s := openTemp(t, dsn)
	other := openTemp(t, dsn) // another replica on the same database
	notices := s.WatchBlocks(t.Context())
	next := func() store.Notice {
		t.Helper()
		select {
		case n := <-notices:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("no notice within 10s")
			return store.Notice{}
		}
	}
	// The watch says Lost once it listens: what was committed before it
	// must be reloaded; whatever comes after is heard.
	if n := next(); !n.Lost {
		t.Fatalf("first notice %+v, want Lost", n)
	}

	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	block := func(id string, node string) core.Block {
		return core.Block{ID: id, Name: id, Team: "t", InstanceType: "x", GPUModel: "H100", Count: 1, Zone: "z",
			Start: start, End: start.Add(4 * time.Hour), State: core.StateScheduled,
			Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
			Placements: []core.Placement{{Node: node, GPUs: []int{0}}}}
	}
	a, b := block("a", "n1"), block("b", "n2")
	if err := other.Commit(t.Context(), store.Change{Insert: []core.Block{a, b}}); err != nil {
		t.Fatal(err)
	}
	a.Version = 1
	a.End = a.End.Add(time.Hour)
	if err := other.Commit(t.Context(), store.Change{Update: []store.BlockUpdate{{Block: a, ExpectedVersion: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Barrier(t.Context(), "after-both"); err != nil {
		t.Fatal(err)
	}
	// The notices carry the blocks as the commits left them.
	a1, a2, b1 := a, a, b
	a1.Version, a1.End = 1, b.End
	a2.Version, b1.Version = 2, 1
	want := []shownNotice{
		{Blocks: []shownBlock{{ID: "a", Version: 1, Block: &a1}, {ID: "b", Version: 1, Block: &b1}}},
		{Blocks: []shownBlock{{ID: "a", Version: 2, Block: &a2}}},
		{Barrier: "after-both"},
	}
	for i, w := range want {
		if diff := cmp.Diff(w, show(t, next())); diff != "" {
			t.Fatalf("notice %d (-want +got):\n%s", i, diff)
		}
	}
	// A refused commit notifies nothing: the next notice is the barrier.
	if err := other.Commit(t.Context(), store.Change{Insert: []core.Block{block("c", "n1")}}); !store.IsConflict(err) {
		t.Fatalf("Commit of c over a: got %v, want a conflict", err)
	}
	if err := other.Barrier(t.Context(), "after-refusal"); err != nil {
		t.Fatal(err)
	}
	if n := next(); n.Barrier != "after-refusal" {
		t.Fatalf("notice after a refused commit: %+v, want the barrier", n)
	}
	// Changes to tokens, quotas and budgets tell the watches too.
	if err := other.PutBudget(t.Context(), core.Budget{Team: "t", Amount: core.Money{Minor: 5, Currency: "USD"}, Period: core.BudgetMonth}); err != nil {
		t.Fatal(err)
	}
	if err := other.PutQuota(t.Context(), core.Quota{Team: "t", MaxInstancesHeld: 3}); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"budget", "quota"} {
		if n := next(); !n.Accounts {
			t.Fatalf("notice after a %s change: %+v, want Accounts", what, n)
		}
	}
	// So does the revocation of an access key, which replicas cache.
	if err := other.CreateTeam(t.Context(), core.Team{ID: "t", Name: "t", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := other.CreateUser(t.Context(), core.User{ID: "u", Name: "u", Team: "t", Role: core.RoleMember, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	key := core.AccessKey{ID: "ak-1", AccessKeyID: "AKIA0000000000000001", User: "u", CreatedAt: time.Now(),
		Secret: core.SealedSecret{KeyID: "sk-1", Nonce: []byte{1}, Ciphertext: []byte{2}}}
	if err := other.CreateAccessKey(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if err := other.RevokeAccessKey(t.Context(), key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := next(); !n.Accounts {
		t.Fatalf("notice after an access key's revocation: %+v, want Accounts", n)
	}
}

// TestWatchHealthAndActions follows a node's failure, committed with the
// block it moves and the actions that cause, through another replica's
// watch: the health notice comes within a second of the commit, before
// the block's; the actions notice after it. Commits without health or
// actions say neither.
func TestWatchHealthAndActions(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s := openTemp(t, dsn)
	other := openTemp(t, dsn)
	notices := s.WatchBlocks(t.Context())
	next := func(within time.Duration) store.Notice {
		t.Helper()
		select {
		case n := <-notices:
			return n
		case <-time.After(within):
			t.Fatalf("no notice within %s", within)
			return store.Notice{}
		}
	}
	if n := next(10 * time.Second); !n.Lost {
		t.Fatalf("first notice %+v, want Lost", n)
	}
	start := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	b := core.Block{ID: "b", Name: "b", Team: "t", InstanceType: "x", GPUModel: "H100", Count: 1, Zone: "z",
		Start: start, End: start.Add(4 * time.Hour), State: core.StateScheduled,
		Fee: core.Money{Minor: 1, Currency: "USD"}, CreatedAt: start,
		Placements: []core.Placement{{Node: "n1", GPUs: []int{0}}}}
	if err := other.Commit(t.Context(), store.Change{Insert: []core.Block{b}}); err != nil {
		t.Fatal(err)
	}
	if n := next(10 * time.Second); len(n.Blocks) != 1 || n.Health || n.Actions {
		t.Fatalf("notice of a purchase without actions: %+v, want its block alone", show(t, n))
	}

	// n1 fails: b moves to n2, and its placement is activated there.
	moved := b
	moved.Version, moved.Placements = 1, []core.Placement{{Node: "n2", GPUs: []int{0}}}
	failure := store.Change{
		Update:     []store.BlockUpdate{{Block: moved, ExpectedVersion: 1, Replace: true}},
		NodeHealth: []core.NodeHealth{{Node: "n1", Health: core.Unhealthy, Reason: "XID 79", Since: start, Source: core.HealthFromEngine}},
		Actions:    []core.Action{{ID: "act-1", Kind: core.ActionActivate, Subject: "b", Team: "t", NextAt: start, CreatedAt: start}},
	}
	if err := other.Commit(t.Context(), failure); err != nil {
		t.Fatal(err)
	}
	if n := next(time.Second); !n.Health {
		t.Fatalf("first notice of a node's failure: %+v, want Health", show(t, n))
	}
	moved.Version = 2
	if diff := cmp.Diff(shownNotice{Blocks: []shownBlock{{ID: "b", Version: 2, Block: &moved}}}, show(t, next(time.Second))); diff != "" {
		t.Fatalf("second notice of a node's failure (-want +got):\n%s", diff)
	}
	if n := next(time.Second); !n.Actions {
		t.Fatalf("last notice of a node's failure: %+v, want Actions", show(t, n))
	}
	// What the notices said is stored.
	hs, err := s.NodeHealth(t.Context())
	if err != nil || len(hs) != 1 || hs[0].Node != "n1" {
		t.Fatalf("NodeHealth after the notice: %+v, %v", hs, err)
	}

	// Health or actions alone notify too, and the next notice is the
	// barrier's: nothing else was sent.
	if err := other.Commit(t.Context(), store.Change{NodeHealth: []core.NodeHealth{{Node: "n1", Health: core.Healthy,
		Since: start.Add(time.Hour), Source: core.HealthFromAdmin}}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(t.Context(), store.Change{Actions: []core.Action{{ID: "act-2", Kind: core.ActionRelease, Subject: "b",
		Team: "t", NextAt: start, CreatedAt: start}}}); err != nil {
		t.Fatal(err)
	}
	if err := other.Barrier(t.Context(), "end"); err != nil {
		t.Fatal(err)
	}
	want := []shownNotice{{Health: true}, {Actions: true}, {Barrier: "end"}}
	for i, w := range want {
		if diff := cmp.Diff(w, show(t, next(10*time.Second))); diff != "" {
			t.Fatalf("notice %d (-want +got):\n%s", i, diff)
		}
	}
}

// shownNotice is a store.Notice with its blocks decoded, to compare.
type shownNotice struct {
	Blocks   []shownBlock
	Barrier  string
	Accounts bool
	Health   bool
	Actions  bool
}

type shownBlock struct {
	ID      string
	Version int64
	Block   *core.Block
}

func show(t *testing.T, n store.Notice) shownNotice {
	t.Helper()
	out := shownNotice{Barrier: n.Barrier, Accounts: n.Accounts, Health: n.Health, Actions: n.Actions}
	for _, bv := range n.Blocks {
		sb := shownBlock{ID: bv.ID, Version: bv.Version}
		if bv.Block != nil {
			b, err := bv.Block()
			if err != nil {
				t.Fatalf("decoding block %s: %v", bv.ID, err)
			}
			sb.Block = &b
		}
		out.Blocks = append(out.Blocks, sb)
	}
	return out
}

// TestNoticePayloads packs blocks under NOTIFY's payload limit, each
// with its contents unless it is too large for a payload on its own, and
// reads back what it wrote.
func TestNoticePayloads(t *testing.T) {
	var (
		bs   []core.Block
		want []shownBlock
	)
	for i := range 300 {
		b := core.Block{ID: fmt.Sprintf("cb-%026d", i), Team: "t", Count: 1, State: core.StateScheduled,
			Start: time.Date(2030, 1, 7, i%24, 0, 0, 0, time.UTC), Version: int64(1 + i%7),
			Placements: []core.Placement{{Node: fmt.Sprintf("n%d", i), GPUs: []int{0, 1, 2, 3}}}}
		if i == 150 { // too large for one payload
			for n := range 400 {
				b.Placements = append(b.Placements, core.Placement{Node: fmt.Sprintf("node-%05d", n), GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}})
			}
		}
		bs = append(bs, b)
		sb := shownBlock{ID: b.ID, Version: b.Version, Block: &bs[len(bs)-1]}
		if i == 150 {
			sb.Block = nil // named only: readers load it
		}
		want = append(want, sb)
	}
	payloads := encodeNotices(bs)
	if len(payloads) < 2 {
		t.Fatalf("%d blocks fit in %d payload(s), want several", len(bs), len(payloads))
	}
	var got []shownBlock
	for _, p := range payloads {
		if len(p) > maxPayload {
			t.Errorf("payload of %d bytes, above %d", len(p), maxPayload)
		}
		n, err := decodeNotice(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, show(t, n).Blocks...)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if n, err := decodeNotice(barrierMark + "tok"); err != nil || n.Barrier != "tok" || n.Blocks != nil {
		t.Errorf("barrier payload: %+v, %v", n, err)
	}
	if n, err := decodeNotice(accountsNotice); err != nil || !n.Accounts || n.Blocks != nil {
		t.Errorf("accounts payload: %+v, %v", n, err)
	}
	if n, err := decodeNotice(healthNotice); err != nil || !n.Health || n.Accounts || n.Actions || n.Blocks != nil {
		t.Errorf("health payload: %+v, %v", n, err)
	}
	if n, err := decodeNotice(actionsNotice); err != nil || !n.Actions || n.Accounts || n.Health || n.Blocks != nil {
		t.Errorf("actions payload: %+v, %v", n, err)
	}
	for _, bad := range []string{"", "a@1", "[]", "[{}]", strings.Repeat("[", 3)} {
		if n, err := decodeNotice(bad); err == nil {
			t.Errorf("decodeNotice(%q) = %+v, want an error", bad, n)
		}
	}
	// A block that is not the one its item names is refused when read.
	for _, bad := range []string{`[{"id":"a","v":1,"b":{"ID":"b","Version":1}}]`, `[{"id":"a","v":2,"b":{"ID":"a","Version":1}}]`,
		`[{"id":"a","v":1,"b":{"ID":"a","Version":"x"}}]`} {
		n, err := decodeNotice(bad)
		if err != nil {
			t.Fatalf("decodeNotice(%q): %v", bad, err)
		}
		if b, err := n.Blocks[0].Block(); err == nil {
			t.Errorf("block of %q = %+v, want an error", bad, b)
		}
	}
}
