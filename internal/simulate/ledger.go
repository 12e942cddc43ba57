package simulate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"capblock/internal/core"
)

// ledger reads the journals committed since it last read, checking each
// as it comes, into running balances: each step costs what the step
// committed, not the whole ledger (DESIGN.md, invariants 6 and 10).
type ledger struct {
	lastSeq int64
	balance map[string]int64 // by account
	total   int64
	// paid and back are what each team paid for, and had back for, each
	// block's hours.
	paid, back map[teamBlock]int64
	// charged is what each block's purchase and extension journals
	// charged its team: its fee, for a block never handed on.
	charged map[string]int64
	// purchases counts each block's purchase journals: one per block.
	purchases map[string]int
	// spend is each budgeted team's spending by period; chargedNow the
	// teams the instant being read charged, checked once it is read.
	budgets    map[string]core.Budget
	spend      map[string]map[string]int64
	chargedNow map[string]string
	names      map[string]string
	// touched are the blocks the last read's journals were about.
	touched map[string]bool
	read    int
}

type teamBlock struct{ team, block string }

func newLedger() *ledger {
	return &ledger{balance: map[string]int64{}, paid: map[teamBlock]int64{}, back: map[teamBlock]int64{},
		charged: map[string]int64{}, purchases: map[string]int{}, spend: map[string]map[string]int64{},
		chargedNow: map[string]string{}, touched: map[string]bool{}}
}

// add takes in the journals committed since the last read.
func (l *ledger) add(js []core.Journal) error {
	for i, j := range js {
		if err := l.addOne(j); err != nil {
			return fmt.Errorf("journal %d (%s, %s about %s at %s): %w\n%s", j.Seq, j.ID, j.Kind, j.Subject,
				j.Time.Format(time.RFC3339), err, postingsText(j))
		}
		if i+1 < len(js) && js[i+1].Time.Equal(j.Time) {
			continue // one instant's journals are read together
		}
		if err := l.checkBudgets(); err != nil {
			return fmt.Errorf("after journal %d (%s, %s about %s at %s): %w", j.Seq, j.ID, j.Kind, j.Subject,
				j.Time.Format(time.RFC3339), err)
		}
	}
	return nil
}

func (l *ledger) addOne(j core.Journal) error {
	// 1. The journal alone: in order, valid, balanced.
	if j.Seq <= l.lastSeq {
		return fmt.Errorf("seq %d comes after seq %d", j.Seq, l.lastSeq)
	}
	l.lastSeq = j.Seq
	l.read++
	if err := j.Check(); err != nil {
		return err
	}
	var sum int64
	for _, p := range j.Postings {
		sum += p.Amount
		if core.IsWallet(p.Account) && ((p.Kind == core.LedgerCharge) != (p.Amount < 0)) && p.Amount != 0 {
			return fmt.Errorf("a %s of %d on %s: a charge takes money out of a wallet, a refund or credit brings it in", p.Kind, p.Amount, p.Account)
		}
	}
	if sum != 0 {
		return fmt.Errorf("its postings sum to %d, not 0", sum)
	}
	// 2. The running balances: every account together at zero, no
	//    escrow below zero.
	blocks := blocksOf(j)
	for _, p := range j.Postings {
		l.balance[p.Account] += p.Amount
		l.total += p.Amount
		if !core.IsWallet(p.Account) {
			continue
		}
		for _, b := range blocks {
			switch p.Kind {
			case core.LedgerCharge:
				l.paid[teamBlock{p.Team, b}] -= p.Amount
			case core.LedgerRefund:
				l.back[teamBlock{p.Team, b}] += p.Amount
			}
		}
		if p.Kind == core.LedgerCharge && (j.Kind == core.JournalPurchase || j.Kind == core.JournalExtension) {
			l.charged[j.Subject] -= p.Amount
		}
		if bu, ok := l.budgets[p.Team]; ok {
			period := periodOf(bu, j.Time)
			if l.spend[p.Team] == nil {
				l.spend[p.Team] = map[string]int64{}
			}
			l.spend[p.Team][period] += p.Spending(false)
			if p.Kind == core.LedgerCharge {
				l.chargedNow[p.Team] = period
			}
		}
	}
	if j.Kind == core.JournalPurchase {
		l.purchases[j.Subject]++
	}
	if l.total != 0 {
		return fmt.Errorf("the accounts sum to %d, not 0", l.total)
	}
	for _, b := range blocks {
		l.touched[b] = true
		if e := l.balance[core.EscrowAccount(b)]; e < 0 {
			return fmt.Errorf("the escrow of block %s holds %d: below zero", b, e)
		}
	}
	// 3. No team has had back more for a block's hours than it paid.
	for _, p := range j.Postings {
		if !core.IsWallet(p.Account) || p.Kind != core.LedgerRefund {
			continue
		}
		for _, b := range blocks {
			if k := (teamBlock{p.Team, b}); l.back[k] > l.paid[k] {
				return fmt.Errorf("team %s has had %d back for block %s, for which it paid %d", l.names[p.Team], l.back[k], b, l.paid[k])
			}
		}
	}
	return nil
}

// checkBudgets checks that no team the instant just read charged has
// spent more than its budget in the period of the charge.
func (l *ledger) checkBudgets() error {
	defer clear(l.chargedNow)
	for _, team := range slices.Sorted(maps.Keys(l.chargedNow)) {
		bu, period := l.budgets[team], l.chargedNow[team]
		if got := l.spend[team][period]; got > bu.Amount.Minor {
			return fmt.Errorf("team %s has spent %d in %s, above its %s budget of %d", l.names[team], got, period, bu.Period, bu.Amount.Minor)
		}
	}
	return nil
}

// periodOf is the budget period a journal at t counts in.
func periodOf(b core.Budget, t time.Time) string {
	if b.Period == core.BudgetMonth {
		return t.UTC().Format("2006-01")
	}
	return "total"
}

// blocksOf are the blocks a journal is about: those whose escrow it
// moves, and its subject when that is a block.
func blocksOf(j core.Journal) []string {
	var out []string
	for _, p := range j.Postings {
		if id, ok := strings.CutPrefix(p.Account, core.EscrowAccount("")); ok && id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if isBlockID(j.Subject) && !slices.Contains(out, j.Subject) {
		out = append(out, j.Subject)
	}
	return out
}

// isBlockID reports whether id names a block (cb-…).
func isBlockID(id string) bool { return strings.HasPrefix(id, "cb-") }

func postingsText(j core.Journal) string {
	var b strings.Builder
	for _, p := range j.Postings {
		fmt.Fprintf(&b, "  %-32s %-8s team %-24s %10d\n", p.Account, p.Kind, p.Team, p.Amount)
	}
	return b.String()
}
