package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// BlockV16 is a block as a migration test writes it into a version-16
// database: what the migration of the ledger reads of it.
type BlockV16 struct {
	ID, Team   string
	Start, End time.Time
}

// LedgerRowV16 is a row of the ledger table that migration 0017_journals
// replaces: one charge or refund of a team, in minor units.
type LedgerRowV16 struct {
	ID           string
	Team         string
	Time         time.Time
	Kind         string // core.LedgerCharge or core.LedgerRefund
	Amount       int64  // positive, but a refund could be stored negative
	Currency     string
	Subject      string // a block, or a spot job
	InstanceType string
	OnDemand     int64 // signed as Amount
}

// LedgerV16 is the money of a version-16 database that
// CheckLedgerMigrated expects to find as journals once the store has
// applied 0017_journals: two teams' blocks and their ledger rows, listed
// in the order they are to be inserted, which is not the ledger's order
// (time, then id).
func LedgerV16() ([]BlockV16, []LedgerRowV16) {
	blocks := []BlockV16{
		{ID: "b1", Team: "team-a", Start: hour(0), End: hour(8)},
		{ID: "b2", Team: "team-b", Start: hour(0), End: hour(8)},
	}
	row := func(id, team string, h int, kind string, amount int64, subject string, onDemand int64) LedgerRowV16 {
		return LedgerRowV16{ID: id, Team: team, Time: hour(h), Kind: kind, Amount: amount, Currency: "USD",
			Subject: subject, InstanceType: "h100.8x", OnDemand: onDemand}
	}
	rows := []LedgerRowV16{
		// A spot run of team-a two days before, outside the budget period,
		// with the last id: the ledger's order is not the ids'.
		row("le-7", "team-a", -48, core.LedgerCharge, 4_000, "job-0", 0),
		// Two purchases at t0, written in the other order.
		row("le-2", "team-b", 0, core.LedgerCharge, 8_000, "b2", 0),
		row("le-1", "team-a", 0, core.LedgerCharge, 10_000, "b1", 15_000),
		// A refund stored negative: version 16's budget read it with abs().
		row("le-3", "team-a", 1, core.LedgerRefund, -2_500, "b1", -3_750),
		// A spot run and a refund at the same instant, in the other order.
		row("le-5", "team-a", 2, core.LedgerCharge, 1_200, "job-1", 2_000),
		row("le-4", "team-a", 2, core.LedgerRefund, 500, "b1", 750),
		row("le-6", "team-b", 3, core.LedgerRefund, 1_000, "b2", 0),
	}
	return blocks, rows
}

// CheckLedgerMigrated checks a store opened on a version-16 database that
// holds LedgerV16, after it applied 0017_journals: each ledger row is a
// balanced journal of the team's wallet and the block's escrow (the
// revenue for a spot run), the ledgers read as before, budgets count the
// migrated spending as version 16 did, and new journals come after the
// migrated ones. It commits into s.
func CheckLedgerMigrated(t *testing.T, s store.Store) {
	ctx := t.Context()
	usd := func(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }
	migrated := func(seq int64, id string, h int, subject string, ps ...core.Posting) core.Journal {
		return core.Journal{ID: id, Seq: seq, Time: hour(h), Kind: core.JournalMigrated, Subject: subject,
			InstanceType: "h100.8x", Currency: "USD", Postings: ps}
	}
	wallet := func(team, kind string, amount, onDemand int64) core.Posting {
		return core.Posting{Account: core.WalletAccount(team), Team: team, Kind: kind, Amount: amount, OnDemand: onDemand}
	}
	escrow := func(block, team string, amount, onDemand int64) core.Posting {
		return core.Posting{Account: core.EscrowAccount(block), Team: team, Kind: core.PostingEscrow, Amount: amount, OnDemand: onDemand}
	}
	revenue := func(team string, amount, onDemand int64) core.Posting {
		return core.Posting{Account: core.RevenueAccount, Team: team, Kind: core.PostingRevenue, Amount: amount, OnDemand: onDemand}
	}
	// In the ledger's order, time then id; refunds, whatever their stored
	// sign, pay the wallet back out of the escrow.
	want := []core.Journal{
		migrated(1, "le-7", -48, "job-0", wallet("team-a", core.LedgerCharge, -4_000, 0), revenue("team-a", 4_000, 0)),
		migrated(2, "le-1", 0, "b1", wallet("team-a", core.LedgerCharge, -10_000, -15_000), escrow("b1", "team-a", 10_000, 15_000)),
		migrated(3, "le-2", 0, "b2", wallet("team-b", core.LedgerCharge, -8_000, 0), escrow("b2", "team-b", 8_000, 0)),
		migrated(4, "le-3", 1, "b1", wallet("team-a", core.LedgerRefund, 2_500, 3_750), escrow("b1", "team-a", -2_500, -3_750)),
		migrated(5, "le-4", 2, "b1", wallet("team-a", core.LedgerRefund, 500, 750), escrow("b1", "team-a", -500, -750)),
		migrated(6, "le-5", 2, "job-1", wallet("team-a", core.LedgerCharge, -1_200, -2_000), revenue("team-a", 1_200, 2_000)),
		migrated(7, "le-6", 3, "b2", wallet("team-b", core.LedgerRefund, 1_000, 0), escrow("b2", "team-b", -1_000, 0)),
	}
	lastMigrated := want[len(want)-1].Seq

	t.Run("journals", func(t *testing.T) {
		got, err := s.Journals(ctx, store.JournalFilter{})
		mustDo(t, "Journals", err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Journals after 0017 (-want +got):\n%s", diff)
		}
		var sum int64
		for _, j := range got {
			if err := j.Check(); err != nil {
				t.Errorf("migrated journal %s: %v", j.ID, err)
			}
			for _, p := range j.Postings {
				sum += p.Amount
			}
		}
		if sum != 0 {
			t.Errorf("all postings sum to %d, want 0", sum)
		}
	})

	t.Run("ledgers", func(t *testing.T) {
		entry := func(j core.Journal, kind string, amount, onDemand int64) core.LedgerEntry {
			return core.LedgerEntry{ID: j.ID + ".0", Journal: j.ID, Seq: j.Seq, Team: j.Postings[0].Team, Time: j.Time,
				Kind: kind, Amount: usd(amount), Subject: j.Subject, InstanceType: "h100.8x", OnDemand: usd(onDemand)}
		}
		// As version 16 read them, by time then id, but with every amount
		// positive: the kind says which way the money went.
		teamA := []core.LedgerEntry{
			entry(want[0], core.LedgerCharge, 4_000, 0),
			entry(want[1], core.LedgerCharge, 10_000, 15_000),
			entry(want[3], core.LedgerRefund, 2_500, 3_750),
			entry(want[4], core.LedgerRefund, 500, 750),
			entry(want[5], core.LedgerCharge, 1_200, 2_000),
		}
		teamB := []core.LedgerEntry{
			entry(want[2], core.LedgerCharge, 8_000, 0),
			entry(want[6], core.LedgerRefund, 1_000, 0),
		}
		all := []core.LedgerEntry{teamA[0], teamA[1], teamB[0], teamA[2], teamA[3], teamA[4], teamB[1]}
		for team, entries := range map[string][]core.LedgerEntry{"team-a": teamA, "team-b": teamB, "": all} {
			got, err := s.Ledger(ctx, team)
			mustDo(t, "Ledger("+team+")", err)
			if diff := cmp.Diff(entries, got); diff != "" {
				t.Errorf("Ledger(%q) after 0017 (-want +got):\n%s", team, diff)
			}
		}
	})

	t.Run("balances", func(t *testing.T) {
		js, err := s.Journals(ctx, store.JournalFilter{})
		mustDo(t, "Journals", err)
		got := map[string]int64{}
		for _, j := range js {
			for _, p := range j.Postings {
				got[p.Account] += p.Amount
			}
		}
		// Escrows hold what their blocks were paid less what was paid back.
		balances := map[string]int64{
			core.EscrowAccount("b1"):     10_000 - 2_500 - 500,
			core.EscrowAccount("b2"):     8_000 - 1_000,
			core.RevenueAccount:          4_000 + 1_200,
			core.WalletAccount("team-a"): -4_000 - 10_000 + 2_500 + 500 - 1_200,
			core.WalletAccount("team-b"): -8_000 + 1_000,
		}
		if diff := cmp.Diff(balances, got); diff != "" {
			t.Errorf("balances after 0017 (-want +got):\n%s", diff)
		}
		// A block's journals, which a cancellation reads for what may be
		// refunded, hold what was paid for it and its escrow.
		js, err = s.Journals(ctx, store.JournalFilter{Subject: "b1"})
		mustDo(t, "Journals of b1", err)
		if diff := cmp.Diff([]core.Journal{want[1], want[3], want[4]}, js); diff != "" {
			t.Errorf("Journals(subject b1) after 0017 (-want +got):\n%s", diff)
		}
	})

	t.Run("budget", func(t *testing.T) {
		// Version 16 counted, since t0: 10,000 - 2,500 - 500 + 1,200 =
		// 8,200 (le-7 is before; the refund stored negative counts
		// negative). Under a limit of 10,000, 1,800 more fits, 1,801 does
		// not.
		g := budgetGuard("team-a", 10_000, hour(0))
		over := core.Payment("j-over", core.JournalPurchase, hour(4), "team-a", "b1", "h100.8x", usd(1_801), core.Money{}, core.EscrowAccount("b1"))
		err := s.Commit(ctx, spending(g, over))
		if !errors.Is(err, core.ErrBudgetExceeded) {
			t.Fatalf("Commit of 1,801 over a spend of 8,200 under 10,000: got %v, want ErrBudgetExceeded", err)
		}
		fits := core.Payment("j-fits", core.JournalPurchase, hour(4), "team-a", "b1", "h100.8x", usd(1_800), core.Money{}, core.EscrowAccount("b1"))
		c := spending(g, fits)
		mustDo(t, "Commit of 1,800 over a spend of 8,200 under 10,000", s.Commit(ctx, c))

		// The new journal comes after the migrated ones.
		if c.Journals[0].Seq <= lastMigrated {
			t.Errorf("new journal's Seq %d, want after the migrated ones' (last %d)", c.Journals[0].Seq, lastMigrated)
		}
		fits.Seq = c.Journals[0].Seq
		got, err := s.Journals(ctx, store.JournalFilter{After: lastMigrated})
		mustDo(t, "Journals after the migrated ones", err)
		if diff := cmp.Diff([]core.Journal{fits}, got); diff != "" {
			t.Errorf("Journals after the migrated ones (-want +got):\n%s", diff)
		}
	})
}

// ActionsV17 are the pending actions of a version-17 database, which
// CheckLeasesMigrated expects a store to hold once it applied
// 0018_leases: two of block b1, the second waiting for the first, and one
// of b2 that a worker tried once. A migration test inserts them as
// version 17 stored them: no epoch claimed them.
func ActionsV17() []core.Action {
	a := func(id string, kind core.ActionKind, subject string) core.Action {
		return stored(makeAction(id, kind, subject, hour(0)))
	}
	tried := a("act-3", core.ActionActivate, "b2")
	tried.Attempts, tried.LastError, tried.NextAt = 1, "connection refused", hour(0).Add(1500*time.Millisecond)
	return []core.Action{a("act-1", core.ActionActivate, "b1"), a("act-2", core.ActionRelease, "b1"), tried}
}

// CheckLeasesMigrated checks a store opened on a version-17 database
// that holds ActionsV17, after it applied 0018_leases: the actions are
// kept as they were and due as before; no lease is current, so the first
// term takes epoch 1; no epoch claimed the actions, so that term records
// them only once it claimed them. It changes s.
func CheckLeasesMigrated(t *testing.T, s store.Full) {
	as := ActionsV17()
	wantActions(t, s, "b1", as[0], as[1])
	wantActions(t, s, "b2", as[2])
	wantDue(t, s, hour(1), 0, "act-1", "act-3")

	l := &leader{t: t, s: s, epoch: wantAcquired(t, s, "a", longTTL, 1).Epoch}
	changed, err := s.FinishAction(t.Context(), l.epoch, "act-1", hour(1))
	mustDo(t, "FinishAction of a migrated action", err)
	if changed {
		t.Fatalf("FinishAction of a migrated action changed it before epoch %d claimed it", l.epoch)
	}
	wantClaimed(t, s, l.epoch, hour(1), 0, "act-1", "act-3")
	l.finish("act-1", hour(1), true)
	wantClaimed(t, s, l.epoch, hour(1), 0, "act-2", "act-3")
}
