package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"capblock/internal/core"
	"capblock/internal/store"
)

func testIdempotency(t *testing.T, h Harness) {
	s := h.Open(t)
	if _, err := s.Idempotency(t.Context(), "team-a", "tok"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Idempotency of an unknown token: got error %v, want ErrNotFound", err)
	}
	rec := store.IdempotencyRecord{Team: "team-a", ClientToken: "tok", RequestHash: "sha256:abc", Subject: "b1", CreatedAt: hour(-2)}
	mustCommit(t, s, store.Change{Idempotency: []store.IdempotencyRecord{rec}})
	got, err := s.Idempotency(t.Context(), "team-a", "tok")
	if err != nil {
		t.Fatalf("Idempotency: %v", err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("Idempotency mismatch (-want +got):\n%s", diff)
	}
	// Tokens are per team.
	if _, err := s.Idempotency(t.Context(), "team-b", "tok"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Idempotency of another team: got error %v, want ErrNotFound", err)
	}
	other := rec
	other.Team, other.Subject = "team-b", "b2"
	mustCommit(t, s, store.Change{Idempotency: []store.IdempotencyRecord{other}})
	// The same key twice in one change is a conflict too.
	dup := store.IdempotencyRecord{Team: "team-a", ClientToken: "tok2", RequestHash: "h", Subject: "b3", CreatedAt: hour(0)}
	wantConflict(t, s, store.Change{Idempotency: []store.IdempotencyRecord{dup, dup}})
	if _, err := s.Idempotency(t.Context(), "team-a", "tok2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Idempotency of a refused change: got error %v, want ErrNotFound", err)
	}
}

func testIdempotencyAtomic(t *testing.T, h Harness) {
	s := h.Open(t)
	first := makeBlock("b1").on("n1", 0).obj()
	rec := store.IdempotencyRecord{Team: "team-a", ClientToken: "tok", RequestHash: "h1", Subject: "b1", CreatedAt: hour(-1)}
	mustCommit(t, s, store.Change{Insert: []core.Block{first}, Idempotency: []store.IdempotencyRecord{rec}})

	// A retry with the same token, planned as a new purchase on free GPUs,
	// stores none of its parts.
	retry := makeBlock("b2").on("n2", 0).obj()
	wantConflict(t, s, store.Change{
		Insert:      []core.Block{retry},
		Idempotency: []store.IdempotencyRecord{{Team: "team-a", ClientToken: "tok", RequestHash: "h2", Subject: "b2", CreatedAt: hour(0)}},
		Journals:    []core.Journal{charge("l2", "team-a", hour(0), retry.Fee, "b2")},
		Events:      []core.Event{{ID: "e2", Time: hour(0), Type: "block.created", Subject: "b2", Team: "team-a"}},
	})
	wantNoBlock(t, s, "b2")
	wantNoLedger(t, s, "team-a")
	wantNoEvents(t, s)
	got, err := s.Idempotency(t.Context(), "team-a", "tok")
	if err != nil {
		t.Fatalf("Idempotency: %v", err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("Idempotency changed by a refused change (-want +got):\n%s", diff)
	}
	// Its GPUs stayed free.
	mustCommit(t, s, insert(makeBlock("b3").on("n2", 0).obj()))
}

func testListBlocks(t *testing.T, h Harness) {
	s := h.Open(t)
	blocks := map[string]core.Block{
		"a1": makeBlock("a1").on("n1", 0).hours(2, 4).obj(),
		"a2": makeBlock("a2").on("n1", 1).hours(0, 2).state(core.StateCancelled).obj(),
		"a3": makeBlock("a3").on("n1", 2).hours(2, 6).state(core.StateActive).obj(),
		"b1": makeBlock("b1").team("team-b").on("n2", 0).hours(1, 3).state(core.StateExpired).obj(),
		"b2": makeBlock("b2").team("team-b").on("n2", 1).hours(5, 9).obj(),
	}
	// Inserted out of order, over two commits.
	mustCommit(t, s, insert(blocks["b2"], blocks["a3"]))
	mustCommit(t, s, insert(blocks["a1"], blocks["b1"], blocks["a2"]))

	all, err := s.ListBlocks(t.Context(), store.BlockFilter{})
	if err != nil {
		t.Fatalf("ListBlocks: %v", err)
	}
	var want []core.Block
	for _, id := range []string{"a2", "b1", "a1", "a3", "b2"} {
		want = append(want, withVersion(blocks[id], 1))
	}
	if diff := cmp.Diff(want, all, cmpOpts...); diff != "" {
		t.Errorf("ListBlocks of all (-want +got):\n%s", diff)
	}

	tests := map[string]struct {
		filter store.BlockFilter
		want   []string
	}{
		"team": {
			filter: store.BlockFilter{Team: "team-a"},
			want:   []string{"a2", "a1", "a3"},
		},
		"states": {
			filter: store.BlockFilter{States: []core.BlockState{core.StateScheduled, core.StateActive}},
			want:   []string{"a1", "a3", "b2"},
		},
		"one state": {
			filter: store.BlockFilter{States: []core.BlockState{core.StateExpired}},
			want:   []string{"b1"},
		},
		"end after, strictly": {
			filter: store.BlockFilter{EndAfter: hour(4)},
			want:   []string{"a3", "b2"},
		},
		"end after, between hours": {
			filter: store.BlockFilter{EndAfter: hour(3).Add(-time.Second)},
			want:   []string{"b1", "a1", "a3", "b2"},
		},
		"all filters": {
			filter: store.BlockFilter{Team: "team-a", States: []core.BlockState{core.StateScheduled, core.StateCancelled}, EndAfter: hour(1)},
			want:   []string{"a2", "a1"},
		},
		"no match": {
			filter: store.BlockFilter{Team: "team-c"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.ListBlocks(t.Context(), tc.filter)
			if err != nil {
				t.Fatalf("ListBlocks: %v", err)
			}
			var want []core.Block
			for _, id := range tc.want {
				want = append(want, withVersion(blocks[id], 1))
			}
			if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
				t.Errorf("ListBlocks(%+v) (-want +got):\n%s", tc.filter, diff)
			}
		})
	}
}

func testEvents(t *testing.T, h Harness) {
	s := h.Open(t)
	events := []core.Event{
		{ID: "e1", Time: hour(0), Type: "block.created", Subject: "b1", Team: "team-a",
			Data: map[string]any{"fee": "123.45", "count": 2.0, "warned": false,
				"placements": []any{map[string]any{"node": "n1", "gpus": []any{0.0, 1.0}}}}},
		{ID: "e2", Time: hour(0), Type: "ledger.charge", Subject: "b1", Team: "team-a"},
		{ID: "e3", Time: hour(-1), Type: "block.cancelled", Subject: "b0", Team: "team-b", Data: map[string]any{}},
		{ID: "e4", Time: hour(2), Type: "job.started", Subject: "j1", Team: "team-a", Data: map[string]any{"exit": nil}},
	}
	mustCommit(t, s, store.Change{Events: events[:2]})
	mustCommit(t, s, store.Change{Events: events[2:3]})
	mustCommit(t, s, store.Change{Events: events[3:]})

	all, err := s.Events(t.Context(), "", 0, 100)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	ignoreSeq := cmpopts.IgnoreFields(core.Event{}, "Seq")
	if diff := cmp.Diff(events, all, ignoreSeq, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Events (-want +got):\n%s", diff)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq <= all[i-1].Seq {
			t.Fatalf("Seq does not increase: %d then %d", all[i-1].Seq, all[i].Seq)
		}
	}
	if all[0].Seq <= 0 {
		t.Fatalf("first Seq is %d, want > 0", all[0].Seq)
	}

	tests := map[string]struct {
		team  string
		after int64
		limit int
		want  []core.Event
	}{
		"after the first":     {after: all[0].Seq, limit: 10, want: all[1:]},
		"limit":               {after: 0, limit: 2, want: all[:2]},
		"after and limit":     {after: all[1].Seq, limit: 1, want: all[2:3]},
		"no limit":            {after: all[0].Seq, limit: 0, want: all[1:]},
		"after the last":      {after: all[3].Seq, limit: 10},
		"after a future seq":  {after: all[3].Seq + 1000, limit: 10},
		"between two commits": {after: all[2].Seq, limit: 10, want: all[3:]},
		// A team's read holds its own events only; the limit counts them,
		// not the other teams' events in between.
		"one team":                  {team: "team-a", limit: 10, want: []core.Event{all[0], all[1], all[3]}},
		"one team, limit":           {team: "team-a", after: all[0].Seq, limit: 2, want: []core.Event{all[1], all[3]}},
		"one team, past another's":  {team: "team-a", after: all[1].Seq, limit: 1, want: all[3:]},
		"the other team":            {team: "team-b", limit: 10, want: all[2:3]},
		"the other team, after all": {team: "team-b", after: all[2].Seq, limit: 0},
		"a team with no events":     {team: "team-c", limit: 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := s.Events(t.Context(), tc.team, tc.after, tc.limit)
			if err != nil {
				t.Fatalf("Events: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Events(%q, %d, %d) (-want +got):\n%s", tc.team, tc.after, tc.limit, diff)
			}
		})
	}
}

func testLedger(t *testing.T, h Harness) {
	s := h.Open(t)
	usd := func(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }
	bought := core.Payment("l1", core.JournalPurchase, hour(1), "team-a", "b1", "h100.8x", usd(1000), usd(1333), core.EscrowAccount("b1"))
	// A transfer of b1's hours to team-b at a price: the escrow moves
	// with the hours, the price from team-b's wallet to team-a's.
	transfer := core.Journal{ID: "l2", Time: hour(1), Kind: core.JournalTransfer, Subject: "b2", InstanceType: "h100.8x", Currency: "USD",
		Postings: []core.Posting{
			{Account: core.EscrowAccount("b1"), Team: "team-a", Kind: core.PostingEscrow, Amount: -600, OnDemand: -800},
			{Account: core.EscrowAccount("b2"), Team: "team-b", Kind: core.PostingEscrow, Amount: 600, OnDemand: 800},
			{Account: core.WalletAccount("team-b"), Team: "team-b", Kind: core.LedgerCharge, Amount: -250},
			{Account: core.WalletAccount("team-a"), Team: "team-a", Kind: core.LedgerCredit, Amount: 250, Subject: "b1"},
		}}
	// At the same instant as the purchase, after it.
	refunded := refund("l3", "team-a", hour(1), usd(400), "b1")
	other := charge("l4", "team-c", hour(0), usd(1), "b9")
	c1 := store.Change{Journals: []core.Journal{bought, transfer}}
	mustCommit(t, s, c1)
	c2 := store.Change{Journals: []core.Journal{refunded, other}}
	mustCommit(t, s, c2)
	// Commit assigns the journal order.
	seqs := []int64{c1.Journals[0].Seq, c1.Journals[1].Seq, c2.Journals[0].Seq, c2.Journals[1].Seq}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("journal seqs %v do not increase in commit order", seqs)
		}
	}
	bought.Seq, transfer.Seq, refunded.Seq, other.Seq = seqs[0], seqs[1], seqs[2], seqs[3]

	entries := func(team string, js ...core.Journal) []core.LedgerEntry {
		return store.LedgerOf(js, team)
	}
	for _, tc := range []struct {
		team string
		want []core.LedgerEntry
	}{
		{"team-a", entries("team-a", bought, transfer, refunded)},
		{"team-b", entries("team-b", transfer)},
		{"team-c", entries("team-c", other)},
		{"", entries("", bought, transfer, refunded, other)},
	} {
		got, err := s.Ledger(t.Context(), tc.team)
		mustDo(t, "Ledger("+tc.team+")", err)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Ledger(%q) (-want +got):\n%s", tc.team, diff)
		}
	}
	// The lines: the charge before the refund at the same instant, the
	// credit of a transfer's price as a credit, amounts never negative.
	got, _ := s.Ledger(t.Context(), "team-a")
	var kinds []string
	for _, e := range got {
		kinds = append(kinds, fmt.Sprintf("%s %s %d %s", e.Journal, e.Kind, e.Amount.Minor, e.Subject))
	}
	if diff := cmp.Diff([]string{"l1 charge 1000 b1", "l2 credit 250 b1", "l3 refund 400 b1"}, kinds); diff != "" {
		t.Errorf("team-a's ledger lines (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		f    store.JournalFilter
		want []core.Journal
	}{
		{"all", store.JournalFilter{}, []core.Journal{bought, transfer, refunded, other}},
		{"after", store.JournalFilter{After: seqs[1]}, []core.Journal{refunded, other}},
		{"limit", store.JournalFilter{Limit: 1}, []core.Journal{bought}},
		{"team", store.JournalFilter{Team: "team-b"}, []core.Journal{transfer}},
		{"subject", store.JournalFilter{Subject: "b1"}, []core.Journal{bought, transfer, refunded}},
		{"subject received", store.JournalFilter{Subject: "b2"}, []core.Journal{transfer}},
		{"none", store.JournalFilter{Team: "team-z"}, nil},
	} {
		got, err := s.Journals(t.Context(), tc.f)
		mustDo(t, "Journals "+tc.name, err)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Journals(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
	// A journal id is stored once.
	wantConflict(t, s, store.Change{Journals: []core.Journal{charge("l1", "team-d", hour(9), usd(1), "b")}})
	wantNoLedger(t, s, "team-d")
}

// testUnbalancedJournal: a journal whose postings do not sum to zero is
// refused, whatever else the change holds, and nothing of it is stored.
func testUnbalancedJournal(t *testing.T, h Harness) {
	s := h.Open(t)
	usd := func(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }
	b := makeBlock("b1").on("n1", 0).obj()
	minted := charge("l1", "team-a", hour(0), usd(1000), "b1")
	minted.Postings[1].Amount = 999 // a cent vanishes
	one := core.Journal{ID: "l2", Time: hour(0), Kind: core.JournalCancellation, Subject: "b1", Currency: "USD",
		Postings: []core.Posting{{Account: core.WalletAccount("team-a"), Team: "team-a", Kind: core.LedgerRefund, Amount: 500}}}
	for _, j := range []core.Journal{minted, one} {
		c := store.Change{
			Insert:      []core.Block{b},
			Idempotency: []store.IdempotencyRecord{{Team: "team-a", ClientToken: "tok", RequestHash: "h", Subject: "b1", CreatedAt: hour(0)}},
			Journals:    []core.Journal{charge("l0", "team-a", hour(0), usd(1), "b1"), j},
			Events:      []core.Event{{ID: "e1", Time: hour(0), Type: "block.purchased", Subject: "b1", Team: "team-a"}},
		}
		err := s.Commit(t.Context(), c)
		if !errors.Is(err, core.ErrUnbalanced) {
			t.Fatalf("Commit of journal %s: got %v, want ErrUnbalanced", j.ID, err)
		}
		wantNoBlock(t, s, "b1")
		wantNoLedger(t, s, "team-a")
		wantNoEvents(t, s)
		if _, err := s.Idempotency(t.Context(), "team-a", "tok"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Idempotency of a refused change: %v, want ErrNotFound", err)
		}
	}
	js, err := s.Journals(t.Context(), store.JournalFilter{})
	mustDo(t, "Journals", err)
	if len(js) != 0 {
		t.Errorf("stored %d journals of refused changes", len(js))
	}
}
