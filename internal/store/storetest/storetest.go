// Package storetest is the conformance suite that every store driver must
// pass: a driver's test calls Exercise with a Harness that opens fresh,
// empty stores, and the suite checks each method of store.Store against
// the interface's documentation, errors and invariants included (no double
// booking, atomic commits, idempotency keys).
package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Harness opens the stores under test.
type Harness struct {
	// Open returns a new, empty store. The harness closes it when the test
	// ends (t.Cleanup); the suite may close it earlier.
	Open func(t *testing.T) store.Full
	// Reopen closes s and returns a store on the same data, as a restart of
	// the server would. When nil, the tests that need it are skipped.
	Reopen func(t *testing.T, s store.Full) store.Full
	// Replica returns another store on the data of s, open at the same
	// time, as another replica (or process) would open it; the harness
	// closes it when the test ends. When nil, the tests of replicas
	// racing use s itself from several goroutines.
	Replica func(t *testing.T, s store.Full) store.Full
}

// replica returns h.Replica(t, s), or s when the harness has none.
func replica(t *testing.T, h Harness, s store.Full) store.Full {
	t.Helper()
	if h.Replica == nil {
		return s
	}
	return h.Replica(t, s)
}

// Exercise runs the conformance suite as subtests of t.
func Exercise(t *testing.T, h Harness) {
	tests := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"Ping", testPing},
		{"Secret", testSecret},
		{"Reopen", testReopen},
		{"EmptyChange", testEmptyChange},
		{"InsertReadback", testInsertReadback},
		{"GetBlockNotFound", testGetBlockNotFound},
		{"DuplicateBlockID", testDuplicateBlockID},
		{"InvalidChange", testInvalidChange},
		{"Update", testUpdate},
		{"UpdateStaleVersion", testUpdateStaleVersion},
		{"UpdateKeepsPlacementsWithoutReplace", testUpdateKeepsPlacements},
		{"Overlap", testOverlap},
		{"OverlapWithinChange", testOverlapWithinChange},
		{"Replace", testReplace},
		{"ReplaceMakesRoom", testReplaceMakesRoom},
		{"ReplaceFrom", testReplaceFrom},
		{"Extend", testExtend},
		{"Liveness", testLiveness},
		{"Idempotency", testIdempotency},
		{"IdempotencyDuplicateIsAtomic", testIdempotencyAtomic},
		{"ListBlocks", testListBlocks},
		{"Events", testEvents},
		{"Ledger", testLedger},
		{"UnbalancedJournal", testUnbalancedJournal},
		{"ConcurrentCommits", testConcurrentCommits},
	}
	tests = append(tests, accountsTests...)
	tests = append(tests, accessKeysTests...)
	tests = append(tests, budgetTests...)
	tests = append(tests, webhooksTests...)
	tests = append(tests, jobsTests...)
	tests = append(tests, plansTests...)
	tests = append(tests, seriesOrdersTests...)
	tests = append(tests, sharedTests...)
	tests = append(tests, outboxTests...)
	tests = append(tests, leaseTests...)
	tests = append(tests, fencingTests...)
	tests = append(tests, healthTests...)
	tests = append(tests, handoverTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

// t0 is the suite's reference time: a Monday, on the hour, in UTC.
var t0 = time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)

// hour returns t0 plus h hours.
func hour(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// blockBuilder builds test blocks: makeBlock("b1").on("n1", 0, 1).hours(0, 4).obj().
type blockBuilder struct{ b core.Block }

// makeBlock returns a scheduled one-GPU block of team-a over hours [0, 4)
// without placements.
func makeBlock(id string) *blockBuilder {
	return &blockBuilder{core.Block{
		ID:           id,
		Name:         "block " + id,
		Team:         "team-a",
		InstanceType: "h100.1x",
		GPUModel:     "H100",
		Count:        1,
		Zone:         "zone-1",
		Start:        hour(0),
		End:          hour(4),
		State:        core.StateScheduled,
		Fee:          core.Money{Minor: 12_345, Currency: "USD"},
		CreatedAt:    t0.Add(-24 * time.Hour),
	}}
}

func (bb *blockBuilder) team(team string) *blockBuilder { bb.b.Team = team; return bb }

func (bb *blockBuilder) hours(from, to int) *blockBuilder {
	bb.b.Start, bb.b.End = hour(from), hour(to)
	return bb
}

// on adds a placement of the given GPUs of node.
func (bb *blockBuilder) on(node string, gpus ...int) *blockBuilder {
	bb.b.Placements = append(bb.b.Placements, core.Placement{Node: node, GPUs: gpus})
	return bb
}

func (bb *blockBuilder) state(s core.BlockState) *blockBuilder { bb.b.State = s; return bb }

func (bb *blockBuilder) tags(kv ...string) *blockBuilder {
	bb.b.Tags = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		bb.b.Tags[kv[i]] = kv[i+1]
	}
	return bb
}

// obj returns a copy of the block.
func (bb *blockBuilder) obj() core.Block {
	b := bb.b
	b.Placements = nil
	for _, p := range bb.b.Placements {
		b.Placements = append(b.Placements, core.Placement{Node: p.Node, GPUs: append([]int(nil), p.GPUs...)})
	}
	return b
}

// withVersion returns b as the store should return it after v commits.
func withVersion(b core.Block, v int64) core.Block {
	b.Version = v
	return b
}

// cmpOpts compare stored values: times by instant, nil and empty alike.
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

func insert(blocks ...core.Block) store.Change { return store.Change{Insert: blocks} }

func update(b core.Block, expected int64) store.Change {
	return store.Change{Update: []store.BlockUpdate{{Block: b, ExpectedVersion: expected}}}
}

func replace(b core.Block, expected int64) store.Change {
	return store.Change{Update: []store.BlockUpdate{{Block: b, ExpectedVersion: expected, Replace: true}}}
}

// mustCommit fails the test unless c commits.
func mustCommit(t *testing.T, s store.Store, c store.Change) {
	t.Helper()
	if err := s.Commit(t.Context(), c); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// wantConflict fails the test unless c is refused with a conflict.
func wantConflict(t *testing.T, s store.Store, c store.Change) {
	t.Helper()
	err := s.Commit(t.Context(), c)
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Commit: got error %v, want a conflict", err)
	}
	if !store.IsConflict(err) {
		t.Fatalf("IsConflict(%v) is false", err)
	}
}

// wantBlock fails the test unless the stored block equals want.
func wantBlock(t *testing.T, s store.Store, want core.Block) {
	t.Helper()
	got, err := s.GetBlock(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("GetBlock(%s): %v", want.ID, err)
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("GetBlock(%s) mismatch (-want +got):\n%s", want.ID, diff)
	}
}

// wantNoBlock fails the test unless block id is absent.
func wantNoBlock(t *testing.T, s store.Store, id string) {
	t.Helper()
	if _, err := s.GetBlock(t.Context(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetBlock(%s): got error %v, want ErrNotFound", id, err)
	}
}

func testPing(t *testing.T, h Harness) {
	s := h.Open(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// testSecret: a new store holds no signing secret; concurrent first
// stores agree on one, which a later InitSecret does not replace and a
// reopen keeps; SealSecret replaces the clear secret once, only while it
// is still the clear secret given.
func testSecret(t *testing.T, h Harness) {
	s := h.Open(t)
	if got, ok, err := s.Secret(t.Context()); err != nil || ok {
		t.Fatalf("Secret of a new store = %+v, %t, %v; want none", got, ok, err)
	}
	// 1. Concurrent first stores agree on one secret.
	const callers = 8
	secrets := make([]store.SigningSecret, callers)
	errs := make([]error, callers)
	done := make(chan int)
	for i := range callers {
		go func() {
			fresh := bytes.Repeat([]byte{byte(i + 1)}, 32)
			secrets[i], errs[i] = s.InitSecret(t.Context(), store.SigningSecret{Clear: fresh})
			done <- i
		}()
	}
	for range callers {
		<-done
	}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("InitSecret: %v", errs[i])
		}
		if diff := cmp.Diff(secrets[0], secrets[i]); diff != "" {
			t.Fatalf("InitSecret differs between callers (-first +later):\n%s", diff)
		}
	}
	first := secrets[0]
	if len(first.Clear) != 32 || first.Sealed.KeyID != "" {
		t.Fatalf("InitSecret = %+v, want one of the clear secrets given", first)
	}
	got, ok, err := s.Secret(t.Context())
	if err != nil || !ok {
		t.Fatalf("Secret = %v, %t; want the stored one", err, ok)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Fatalf("Secret (-stored +read):\n%s", diff)
	}
	again, err := s.InitSecret(t.Context(), store.SigningSecret{Clear: bytes.Repeat([]byte{0xee}, 32)})
	if err != nil {
		t.Fatalf("InitSecret again: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("InitSecret replaced the secret (-first +later):\n%s", diff)
	}

	// 2. Sealed once, only while it is the clear secret given.
	sealed := core.SealedSecret{KeyID: "sk-0123456789abcdef", Nonce: []byte{0, 1, 2, 255}, Ciphertext: []byte("ciphertext\x00:with a colon and more than 32 bytes")}
	wantErr(t, "SealSecret of another clear secret",
		s.SealSecret(t.Context(), bytes.Repeat([]byte{0xee}, 32), sealed), store.ErrConflict)
	mustDo(t, "SealSecret", s.SealSecret(t.Context(), first.Clear, sealed))
	wantErr(t, "SealSecret twice", s.SealSecret(t.Context(), first.Clear, sealed), store.ErrConflict)
	want := store.SigningSecret{Sealed: sealed}
	if got, ok, err := s.Secret(t.Context()); err != nil || !ok || !cmp.Equal(want, got) {
		t.Fatalf("Secret after sealing = %+v, %t, %v; want %+v", got, ok, err, want)
	}
	if got, err := s.InitSecret(t.Context(), first); err != nil || !cmp.Equal(want, got) {
		t.Fatalf("InitSecret after sealing = %+v, %v; want the sealed secret", got, err)
	}

	// 3. A reopen keeps it; another store has none, and stores a sealed
	// one as given.
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s = h.Reopen(t, s)
	if got, ok, err := s.Secret(t.Context()); err != nil || !ok || !cmp.Equal(want, got) {
		t.Fatalf("Secret after reopen = %+v, %t, %v; want %+v", got, ok, err, want)
	}
	other := h.Open(t)
	if got, ok, err := other.Secret(t.Context()); err != nil || ok {
		t.Fatalf("Secret of another store = %+v, %t, %v; want none", got, ok, err)
	}
	if got, err := other.InitSecret(t.Context(), want); err != nil || !cmp.Equal(want, got) {
		t.Fatalf("InitSecret of a sealed secret = %+v, %v; want it stored as given", got, err)
	}
	wantErr(t, "SealSecret of a sealed secret", other.SealSecret(t.Context(), first.Clear, sealed), store.ErrConflict)
}

func testEmptyChange(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, store.Change{})
}

func testGetBlockNotFound(t *testing.T, h Harness) {
	s := h.Open(t)
	wantNoBlock(t, s, "nope")
}

func testDuplicateBlockID(t *testing.T, h Harness) {
	s := h.Open(t)
	a := makeBlock("a").on("n1", 0).obj()
	mustCommit(t, s, insert(a))
	// The same id elsewhere in time and space is still the same block.
	wantConflict(t, s, insert(makeBlock("a").on("n2", 0).hours(10, 12).obj()))
	wantBlock(t, s, withVersion(a, 1))
}

func testInvalidChange(t *testing.T, h Harness) {
	tests := map[string]core.Block{
		"end before start": makeBlock("x").hours(4, 2).on("n1", 0).obj(),
		"empty range":      makeBlock("x").hours(2, 2).on("n1", 0).obj(),
		"unknown state":    makeBlock("x").state("paused").on("n1", 0).obj(),
		"GPU twice":        makeBlock("x").on("n1", 0).on("n1", 0).obj(),
	}
	s := h.Open(t)
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			// A driver may refuse these as invalid or as conflicts; it
			// must refuse them and store nothing.
			if err := s.Commit(t.Context(), insert(b)); err == nil {
				t.Fatalf("Commit succeeded, want an error")
			}
			wantNoBlock(t, s, b.ID)
		})
	}
}
