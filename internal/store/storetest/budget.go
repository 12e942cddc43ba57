package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// budgetTests check the budget guards of Commit (store.Change.Budgets).
var budgetTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"BudgetWithinLimit", testBudgetWithinLimit},
	{"BudgetExceededStoresNothing", testBudgetExceeded},
	{"BudgetRefunds", testBudgetRefunds},
	{"BudgetSince", testBudgetSince},
	{"BudgetOtherTeams", testBudgetOtherTeams},
	{"BudgetSeveralGuards", testBudgetSeveralGuards},
	{"BudgetConcurrentPurchases", testBudgetConcurrent},
	{"BudgetSpent", testBudgetSpent},
}

// guardDollars is an amount in US cents.
func guardDollars(minor int64) core.Money { return core.Money{Minor: minor, Currency: "USD"} }

// chargeEntry is a journal at hour h where team pays minor into the
// escrow of block "b-"+id.
func chargeEntry(id, team string, h int, minor int64) core.Journal {
	return charge(id, team, hour(h), guardDollars(minor), "b-"+id)
}

// refundEntry is a journal where team is paid minor back from the escrow
// of block "b-"+id; it counts negative.
func refundEntry(id, team string, h int, minor int64) core.Journal {
	return refund(id, team, hour(h), guardDollars(minor), "b-"+id)
}

// creditEntry is a journal where team is credited minor by the revenue:
// income, which a budget counts only when its guard says so.
func creditEntry(id, team string, h int, minor int64) core.Journal {
	return core.Payout(id, core.JournalLending, hour(h), team, "b-"+id, "", guardDollars(minor), core.Money{},
		core.RevenueAccount, "", core.LedgerCredit)
}

// charge is a journal where team pays amount into the escrow of block.
func charge(id, team string, at time.Time, amount core.Money, block string) core.Journal {
	return core.Payment(id, core.JournalPurchase, at, team, block, "", amount, core.Money{}, core.EscrowAccount(block))
}

// refund is a journal where team is paid amount back from the escrow of
// block.
func refund(id, team string, at time.Time, amount core.Money, block string) core.Journal {
	return core.Payout(id, core.JournalCancellation, at, team, block, "", amount, core.Money{},
		core.EscrowAccount(block), team, core.LedgerRefund)
}

func budgetGuard(team string, limit int64, since time.Time) *core.BudgetGuard {
	return &core.BudgetGuard{Team: team, Limit: guardDollars(limit), Since: since}
}

// spending is a change of ledger entries under a budget guard.
func spending(g *core.BudgetGuard, journals ...core.Journal) store.Change {
	return store.Change{Journals: journals, Budgets: guardList(g)}
}

// wantBudgetExceeded fails the test unless c is refused as over budget
// with an error that names the amounts (as core.Money.String writes them).
func wantBudgetExceeded(t *testing.T, s store.Store, c store.Change, amounts ...string) {
	t.Helper()
	err := s.Commit(t.Context(), c)
	if !errors.Is(err, core.ErrBudgetExceeded) {
		t.Fatalf("Commit: got error %v, want ErrBudgetExceeded", err)
	}
	if store.IsConflict(err) {
		t.Fatalf("Commit: %v is a conflict too; a retry would not help", err)
	}
	for _, a := range amounts {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("Commit: error %q does not name the amount %s", err, a)
		}
	}
}

// wantLedger fails the test unless the team's ledger holds exactly the
// lines of the journals with these ids, in this order.
func wantLedger(t *testing.T, s store.Store, team string, ids ...string) {
	t.Helper()
	entries, err := s.Ledger(t.Context(), team)
	mustDo(t, "Ledger("+team+")", err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Journal)
	}
	if diff := cmp.Diff(ids, got, cmpOpts...); diff != "" {
		t.Fatalf("Ledger(%s) ids (-want +got):\n%s", team, diff)
	}
}

func testBudgetWithinLimit(t *testing.T, h Harness) {
	s := h.Open(t)
	g := budgetGuard("team-a", 1000, time.Time{})
	b := makeBlock("b1").on("n1", 0).obj()
	c := spending(g, chargeEntry("l1", "team-a", 0, 600))
	c.Insert = []core.Block{b}
	mustCommit(t, s, c)
	wantBlock(t, s, withVersion(b, 1))
	// Reaching the limit exactly is within it.
	mustCommit(t, s, spending(g, chargeEntry("l2", "team-a", 1, 300), chargeEntry("l3", "team-a", 1, 100)))
	wantLedger(t, s, "team-a", "l1", "l2", "l3")
	// A change without ledger entries passes a full budget.
	mustCommit(t, s, store.Change{Insert: []core.Block{makeBlock("b2").on("n2", 0).obj()}, Budgets: guardList(g)})
	wantBlock(t, s, withVersion(makeBlock("b2").on("n2", 0).obj(), 1))
	// One cent more does not.
	wantBudgetExceeded(t, s, spending(g, chargeEntry("l4", "team-a", 2, 1)), "10.01", "10.00")
	// Without a guard the store does not check.
	mustCommit(t, s, spending(nil, chargeEntry("l4", "team-a", 2, 1)))
	wantLedger(t, s, "team-a", "l1", "l2", "l3", "l4")
}

func testBudgetExceeded(t *testing.T, h Harness) {
	s := h.Open(t)
	b1 := makeBlock("b1").on("n1", 0).obj()
	c := spending(nil, chargeEntry("l1", "team-a", 0, 600))
	c.Insert = []core.Block{b1}
	mustCommit(t, s, c)

	// A purchase-like change over the budget: none of its parts is stored.
	b2 := makeBlock("b2").on("n2", 0, 1).obj()
	renamed := b1
	renamed.Name = "renamed"
	over := store.Change{
		Insert:      []core.Block{b2},
		Update:      []store.BlockUpdate{{Block: renamed, ExpectedVersion: 1}},
		Idempotency: []store.IdempotencyRecord{{Team: "team-a", ClientToken: "tok", RequestHash: "h", Subject: "b2", CreatedAt: hour(0)}},
		Journals:    []core.Journal{chargeEntry("l2", "team-a", 1, 500)},
		Events:      []core.Event{{ID: "e2", Time: hour(1), Type: "block.created", Subject: "b2", Team: "team-a"}},
		Budgets:     guardList(budgetGuard("team-a", 1000, time.Time{})),
	}
	wantBudgetExceeded(t, s, over, "11.00", "10.00")
	wantNoBlock(t, s, "b2")
	wantBlock(t, s, withVersion(b1, 1))
	if _, err := s.Idempotency(t.Context(), "team-a", "tok"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Idempotency of a refused change: got error %v, want ErrNotFound", err)
	}
	wantLedger(t, s, "team-a", "l1")
	wantNoEvents(t, s)
	if over.Insert[0].Version != 0 || over.Update[0].Block.Version != 0 {
		t.Errorf("a refused commit set versions: insert %d, update %d", over.Insert[0].Version, over.Update[0].Block.Version)
	}

	// Its GPUs stay free and its ids unused: within budget it commits.
	over.Budgets = guardList(budgetGuard("team-a", 1100, time.Time{}))
	mustCommit(t, s, over)
	wantBlock(t, s, withVersion(b2, 1))
	wantBlock(t, s, withVersion(renamed, 2))
	wantLedger(t, s, "team-a", "l1", "l2")
}

func testBudgetRefunds(t *testing.T, h Harness) {
	s := h.Open(t)
	g := budgetGuard("team-a", 1000, time.Time{})
	mustCommit(t, s, spending(nil, chargeEntry("l1", "team-a", 0, 1000), refundEntry("l2", "team-a", 1, 400)))
	// Net spend is 600: 400 more fits, 401 does not.
	wantBudgetExceeded(t, s, spending(g, chargeEntry("l3", "team-a", 2, 401)), "10.01", "10.00")
	mustCommit(t, s, spending(g, chargeEntry("l3", "team-a", 2, 400)))
	wantBudgetExceeded(t, s, spending(g, chargeEntry("l4", "team-a", 3, 1)))
	// A change's own refunds count negative too.
	mustCommit(t, s, spending(g, refundEntry("l4", "team-a", 3, 250), chargeEntry("l5", "team-a", 3, 250)))
	wantBudgetExceeded(t, s, spending(g, refundEntry("l6", "team-a", 4, 100), chargeEntry("l7", "team-a", 4, 101)))
	// Credits, income from others, make no room under the budget ...
	mustCommit(t, s, spending(nil, creditEntry("c1", "team-a", 4, 5000)))
	wantBudgetExceeded(t, s, spending(g, chargeEntry("l6", "team-a", 5, 1)), "10.01", "10.00")
	// ... unless the guard counts them (the operator's policy).
	counting := *g
	counting.Credits = true
	mustCommit(t, s, spending(&counting, chargeEntry("l6", "team-a", 5, 4000)))
	wantBudgetExceeded(t, s, spending(&counting, chargeEntry("l7", "team-a", 5, 1001)))
	wantLedger(t, s, "team-a", "l1", "l2", "l3", "l4", "l5", "c1", "l6")
}

func testBudgetSince(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, spending(nil, chargeEntry("old", "team-a", -10, 900), chargeEntry("at", "team-a", 0, 300)))
	// The month began at hour 0: the 900 before it do not count, the 300
	// at its first second do.
	g := budgetGuard("team-a", 1000, hour(0))
	wantBudgetExceeded(t, s, spending(g, chargeEntry("l1", "team-a", 1, 701)), "10.01", "10.00")
	mustCommit(t, s, spending(g, chargeEntry("l1", "team-a", 1, 700)))
	// A guard since the beginning counts everything.
	wantBudgetExceeded(t, s, spending(budgetGuard("team-a", 1900, time.Time{}), chargeEntry("l2", "team-a", 2, 1)), "19.01", "19.00")
	// A later period starts afresh.
	mustCommit(t, s, spending(budgetGuard("team-a", 1000, hour(2)), chargeEntry("l2", "team-a", 2, 1000)))
	wantLedger(t, s, "team-a", "old", "at", "l1", "l2")
}

// testBudgetSpent: Spent is the sum a guard is checked against: charges
// less refunds at or after since, credits only when asked, the team's
// own wallet only.
func testBudgetSpent(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, spending(nil, chargeEntry("old", "team-a", -10, 900), chargeEntry("at", "team-a", 0, 300),
		refundEntry("r1", "team-a", 1, 100), creditEntry("c1", "team-a", 2, 50), chargeEntry("b1", "team-b", 1, 7000)))
	for _, tc := range []struct {
		team    string
		since   time.Time
		credits bool
		want    int64
	}{
		{"team-a", time.Time{}, false, 1100},
		{"team-a", hour(0), false, 200},
		{"team-a", hour(0), true, 150},
		{"team-a", hour(1), false, -100},
		{"team-a", hour(3), true, 0},
		{"team-b", time.Time{}, false, 7000},
		{"team-c", time.Time{}, true, 0},
	} {
		got, err := s.Spent(t.Context(), tc.team, tc.since, tc.credits)
		mustDo(t, "Spent", err)
		if got != tc.want {
			t.Errorf("Spent(%s, since %s, credits %v) = %d, want %d", tc.team, tc.since.Format(time.RFC3339), tc.credits, got, tc.want)
		}
	}
	// Within one cent of what the guard allows, a guarded commit agrees.
	left := 1000 - int64(200)
	wantBudgetExceeded(t, s, spending(budgetGuard("team-a", 1000, hour(0)), chargeEntry("l1", "team-a", 3, left+1)))
	mustCommit(t, s, spending(budgetGuard("team-a", 1000, hour(0)), chargeEntry("l1", "team-a", 3, left)))
}

func testBudgetOtherTeams(t *testing.T, h Harness) {
	s := h.Open(t)
	mustCommit(t, s, spending(nil, chargeEntry("b1", "team-b", 0, 5000)))
	g := budgetGuard("team-a", 1000, time.Time{})
	mustCommit(t, s, spending(g, chargeEntry("a1", "team-a", 1, 900)))
	// Another team's entries in the same change do not count either.
	mustCommit(t, s, spending(g, chargeEntry("a2", "team-a", 2, 100), chargeEntry("b2", "team-b", 2, 5000)))
	wantBudgetExceeded(t, s, spending(g, chargeEntry("a3", "team-a", 3, 1), chargeEntry("b3", "team-b", 3, 1)))
	wantLedger(t, s, "team-a", "a1", "a2")
	wantLedger(t, s, "team-b", "b1", "b2")
	// And team-a's spend does not hold team-b back.
	mustCommit(t, s, spending(budgetGuard("team-b", 10_001, time.Time{}), chargeEntry("b3", "team-b", 3, 1)))
}

// testBudgetConcurrent races 32 purchases of 100 on distinct GPUs under a
// budget of 1000: exactly 10 must commit, whatever the order.
func testBudgetConcurrent(t *testing.T, h Harness) {
	const buyers, price, limit = 32, 100, 1000
	s := h.Open(t)
	g := budgetGuard("team-a", limit, hour(-24))
	var wg sync.WaitGroup
	errs := make([]error, buyers)
	start := make(chan struct{})
	for i := range buyers {
		id := fmt.Sprintf("p%02d", i)
		b := makeBlock(id).on(fmt.Sprintf("n%d", i/8), i%8).obj()
		c := store.Change{
			Insert:      []core.Block{b},
			Idempotency: []store.IdempotencyRecord{{Team: "team-a", ClientToken: "tok-" + id, RequestHash: "h", Subject: id, CreatedAt: hour(0)}},
			Journals:    []core.Journal{charge("l-"+id, "team-a", hour(0), guardDollars(price), id)},
			Events:      []core.Event{{ID: "e-" + id, Time: hour(0), Type: "block.purchased", Subject: id, Team: "team-a"}},
			Budgets:     guardList(g),
		}
		wg.Go(func() {
			<-start
			errs[i] = s.Commit(t.Context(), c)
		})
	}
	close(start)
	wg.Wait()

	won := map[string]bool{}
	for i, err := range errs {
		switch {
		case err == nil:
			won[fmt.Sprintf("p%02d", i)] = true
		case !errors.Is(err, core.ErrBudgetExceeded):
			t.Errorf("purchase p%02d: got error %v, want nil or ErrBudgetExceeded", i, err)
		}
	}
	if len(won) != limit/price {
		t.Errorf("%d purchases committed, want exactly %d", len(won), limit/price)
	}
	entries, err := s.Ledger(t.Context(), "team-a")
	mustDo(t, "Ledger", err)
	var sum int64
	for _, e := range entries {
		sum += e.Amount.Minor
		if !won[e.Subject] {
			t.Errorf("ledger entry %s is of a purchase that failed", e.Journal)
		}
	}
	if sum != limit || len(entries) != len(won) {
		t.Errorf("ledger holds %d entries summing to %d, want %d summing to %d", len(entries), sum, len(won), limit)
	}
	blocks, err := s.ListBlocks(t.Context(), store.BlockFilter{})
	mustDo(t, "ListBlocks", err)
	if len(blocks) != len(won) {
		t.Errorf("stored %d blocks, want %d", len(blocks), len(won))
	}
	for _, b := range blocks {
		if !won[b.ID] {
			t.Errorf("block %s of a failed purchase is stored", b.ID)
		}
	}
	events, err := s.Events(t.Context(), "", 0, 0)
	mustDo(t, "Events", err)
	if len(events) != len(won) {
		t.Errorf("stored %d events, want %d", len(events), len(won))
	}
}

// guardList is a change's guards for one guard, or none for nil.
func guardList(g *core.BudgetGuard) []core.BudgetGuard {
	if g == nil {
		return nil
	}
	return []core.BudgetGuard{*g}
}

// testBudgetSeveralGuards: a change charging two teams is checked against
// each team's guard; one over its budget refuses the whole change.
func testBudgetSeveralGuards(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := budgetGuard("team-a", 1000, time.Time{}), budgetGuard("team-b", 500, time.Time{})
	both := []core.BudgetGuard{*a, *b}
	mustCommit(t, s, store.Change{Journals: []core.Journal{chargeEntry("l1", "team-a", 1, 900), chargeEntry("l2", "team-b", 1, 400)}, Budgets: both})
	err := s.Commit(t.Context(), store.Change{Journals: []core.Journal{chargeEntry("l3", "team-a", 2, 100), chargeEntry("l4", "team-b", 2, 200)}, Budgets: both})
	if !errors.Is(err, core.ErrBudgetExceeded) || !strings.Contains(err.Error(), "team-b") {
		t.Fatalf("team-b over its budget: %v, want ErrBudgetExceeded naming team-b", err)
	}
	for team, want := range map[string]int{"team-a": 1, "team-b": 1} {
		entries, err := s.Ledger(t.Context(), team)
		if err != nil || len(entries) != want {
			t.Fatalf("ledger of %s: %d entries, %v; the refused change stored some", team, len(entries), err)
		}
	}
}
