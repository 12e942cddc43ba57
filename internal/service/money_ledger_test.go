package service

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"capblock/internal/core"
)

// The ledger side of the money property test (money_property_test.go):
// the journals read incrementally, journal by journal, each checked as
// it comes, into running balances that the test compares with its model
// (money_model_test.go). It is plain data; the test feeds it and reports
// the first failure with the step that caused it.

// teamBlock names what one team paid for, or had back for, one block's
// hours.
type teamBlock struct{ team, block string }

// moneyBudget is a team's budget, fixed for a run.
type moneyBudget struct {
	period string // core.BudgetMonth or core.BudgetTotal
	limit  int64
}

// periodOf is the budget period a posting at t counts in.
func (b moneyBudget) periodOf(t time.Time) string {
	if b.period == core.BudgetMonth {
		return t.UTC().Format("2006-01")
	}
	return "total"
}

// ledgerCheck reads the journals committed since the last check and
// keeps running balances, so that each check costs what was committed
// since, not the whole ledger.
type ledgerCheck struct {
	currency string
	credits  bool // budgets count credits (limits.budgetCountsCredits)
	budgets  map[string]moneyBudget
	isBlock  func(id string) bool // a block the test knows of
	jobTeams map[string]string    // the teams of the preemptible jobs
	names    map[string]string    // teams' names, for messages

	lastSeq  int64
	journals int
	kinds    map[string]int   // journals by kind, and "lending" credits
	balance  map[string]int64 // by account
	// unspot is each account's balance but for spot runs' journals, whose
	// price the model leaves to the run (checkSpot).
	unspot  map[string]int64
	total   int64
	paidFor map[teamBlock]int64
	hadBack map[teamBlock]int64
	spend   map[string]map[string]int64 // team → period → spending
	// chargedNow are the teams that the journals of the instant being read
	// charged, with the period they count in: their budgets are checked
	// once the instant's journals are read, since one commit may charge
	// a team and credit it (a purchase of the team's own released hours).
	chargedNow map[string]string
	lines      map[string]int // team → wallet postings so far
	// touched are the blocks whose escrow the journals of the last read
	// moved; the model's figures for them are compared next.
	touched map[string]bool
}

func newLedgerCheck(currency string, credits bool, budgets map[string]moneyBudget, isBlock func(string) bool, names map[string]string) *ledgerCheck {
	return &ledgerCheck{currency: currency, credits: credits, budgets: budgets, isBlock: isBlock, jobTeams: map[string]string{}, names: names,
		kinds: map[string]int{}, balance: map[string]int64{}, unspot: map[string]int64{}, paidFor: map[teamBlock]int64{}, hadBack: map[teamBlock]int64{},
		spend: map[string]map[string]int64{}, chargedNow: map[string]string{}, lines: map[string]int{}, touched: map[string]bool{}}
}

// read takes in the journals committed since the last read, checking
// each as it comes.
func (l *ledgerCheck) read(js []core.Journal) error {
	for i, j := range js {
		if err := l.add(j); err != nil {
			return fmt.Errorf("journal %d (%s, %s about %s at %s): %w\n%s", j.Seq, j.ID, j.Kind, j.Subject,
				j.Time.Format(time.RFC3339), err, postingsText(j))
		}
		if i+1 < len(js) && js[i+1].Time.Equal(j.Time) {
			continue // the instant's journals are read together
		}
		if err := l.checkBudgets(); err != nil {
			return fmt.Errorf("after journal %d (%s, %s about %s at %s): %w\n%s", j.Seq, j.ID, j.Kind, j.Subject,
				j.Time.Format(time.RFC3339), err, postingsText(j))
		}
	}
	return nil
}

// checkBudgets checks that no team charged in the instant just read
// has spent more than its budget in the period the charge counts in.
func (l *ledgerCheck) checkBudgets() error {
	defer clear(l.chargedNow)
	for _, team := range slices.Sorted(maps.Keys(l.chargedNow)) {
		bu, period := l.budgets[team], l.chargedNow[team]
		if got := l.spend[team][period]; got > bu.limit {
			return fmt.Errorf("team %s has spent %d in period %s, above its %s budget of %d (budget counts credits: %v)",
				l.names[team], got, period, bu.period, bu.limit, l.credits)
		}
	}
	return nil
}

// add checks one journal and adds it to the running balances.
func (l *ledgerCheck) add(j core.Journal) error {
	// 1. The journal itself: in order, balanced, one currency, wallet
	//    postings of the wallet kinds, each signed as its kind says.
	if j.Seq <= l.lastSeq {
		return fmt.Errorf("seq %d comes after seq %d: journals out of order", j.Seq, l.lastSeq)
	}
	l.lastSeq = j.Seq
	l.journals++
	l.kinds[j.Kind]++
	if err := j.Check(); err != nil {
		return err
	}
	if j.Currency != l.currency {
		return fmt.Errorf("currency %q; the fleet prices in %s", j.Currency, l.currency)
	}
	var sum int64
	blocks := l.blocksOf(j)
	for _, p := range j.Postings {
		sum += p.Amount
		if !core.IsWallet(p.Account) {
			continue
		}
		switch {
		case p.Kind == core.LedgerCharge && p.Amount > 0, p.Kind != core.LedgerCharge && p.Amount < 0:
			return fmt.Errorf("a %s of %d on %s: charges take money out of a wallet, refunds and credits bring it in", p.Kind, p.Amount, p.Account)
		}
	}
	if sum != 0 {
		return fmt.Errorf("postings sum to %d, not 0", sum)
	}
	// 2. The running balances; no escrow below zero.
	for _, p := range j.Postings {
		l.balance[p.Account] += p.Amount
		l.total += p.Amount
		if j.Kind != core.JournalSpot {
			l.unspot[p.Account] += p.Amount
		}
		if !core.IsWallet(p.Account) {
			continue
		}
		l.lines[p.Team]++
		for _, b := range blocks {
			switch p.Kind {
			case core.LedgerCharge:
				l.paidFor[teamBlock{p.Team, b}] -= p.Amount
			case core.LedgerRefund:
				l.hadBack[teamBlock{p.Team, b}] += p.Amount
			}
		}
		if bu, ok := l.budgets[p.Team]; ok {
			if l.spend[p.Team] == nil {
				l.spend[p.Team] = map[string]int64{}
			}
			l.spend[p.Team][bu.periodOf(j.Time)] += p.Spending(l.credits)
			if p.Kind == core.LedgerCharge && p.Amount < 0 {
				l.chargedNow[p.Team] = bu.periodOf(j.Time)
			}
		}
	}
	if l.total != 0 {
		return fmt.Errorf("the accounts sum to %d, not 0", l.total)
	}
	for _, p := range j.Postings {
		if id, ok := escrowBlock(p.Account); ok {
			l.touched[id] = true
			if l.balance[p.Account] < 0 {
				return fmt.Errorf("the escrow of block %s holds %d: below zero", id, l.balance[p.Account])
			}
		}
	}
	// 3. No team refunded more than it paid for the block's hours.
	for _, p := range j.Postings {
		if !core.IsWallet(p.Account) || p.Kind != core.LedgerRefund {
			continue
		}
		for _, b := range blocks {
			k := teamBlock{p.Team, b}
			if l.hadBack[k] > l.paidFor[k] {
				return fmt.Errorf("team %s has had %d back for block %s, for which it paid %d", l.names[p.Team], l.hadBack[k], b, l.paidFor[k])
			}
		}
	}
	switch j.Kind {
	case core.JournalSpot:
		return l.checkSpot(j)
	}
	return nil
}

// checkSpot checks a spot run's journal: the job's team charged, into
// the revenue, and what the lenders are credited out of it no more than
// the charge.
func (l *ledgerCheck) checkSpot(j core.Journal) error {
	var charge, credits int64
	for _, p := range j.Postings {
		switch {
		case core.IsWallet(p.Account) && p.Kind == core.LedgerCharge:
			if team := l.jobTeams[j.Subject]; p.Team != team || charge != 0 {
				return fmt.Errorf("the run of job %s, of team %s, charged team %s", j.Subject, l.names[team], l.names[p.Team])
			}
			charge -= p.Amount
		case core.IsWallet(p.Account) && p.Kind == core.LedgerCredit:
			credits += p.Amount
			l.kinds["lending"]++
		case core.IsWallet(p.Account), p.Account != core.RevenueAccount:
			return fmt.Errorf("a spot run's journal has a %s posting on %s", p.Kind, p.Account)
		}
	}
	if credits > charge {
		return fmt.Errorf("a spot run charged %d credits its lenders %d", charge, credits)
	}
	return nil
}

// blocksOf are the blocks a journal is about: those whose escrow it
// moves, and its subject when that is a block.
func (l *ledgerCheck) blocksOf(j core.Journal) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range j.Postings {
		if id, ok := escrowBlock(p.Account); ok && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	if !seen[j.Subject] && l.isBlock(j.Subject) {
		out = append(out, j.Subject)
	}
	return out
}

// escrow is the balance of b's escrow by the journals read so far.
func (l *ledgerCheck) escrow(b string) int64 { return l.balance[core.EscrowAccount(b)] }

// checkLedger checks a team's ledger as the store returns it: lines in
// journal order, as many as the wallet postings read, summing to the
// wallet's balance.
func (l *ledgerCheck) checkLedger(team string, lines []core.LedgerEntry) error {
	var last int64
	lastJournal := ""
	var sum int64
	for i, e := range lines {
		if e.Seq < last || (e.Seq == last && e.Journal != lastJournal) {
			return fmt.Errorf("team %s's ledger: line %d (journal %s, seq %d) after seq %d: not in journal order", l.names[team], i, e.Journal, e.Seq, last)
		}
		last, lastJournal = e.Seq, e.Journal
		if e.Kind == core.LedgerCharge {
			sum -= e.Amount.Minor
		} else {
			sum += e.Amount.Minor
		}
	}
	if len(lines) != l.lines[team] {
		return fmt.Errorf("team %s's ledger has %d lines; the journals have %d postings on its wallet", l.names[team], len(lines), l.lines[team])
	}
	if w := l.balance[core.WalletAccount(team)]; sum != w {
		return fmt.Errorf("team %s's ledger sums to %d; its wallet holds %d", l.names[team], sum, w)
	}
	return nil
}

// escrowBlock is the block whose escrow account is.
func escrowBlock(account string) (string, bool) {
	id, ok := strings.CutPrefix(account, core.EscrowAccount(""))
	return id, ok && id != ""
}

func postingsText(j core.Journal) string {
	s := ""
	for _, p := range j.Postings {
		s += fmt.Sprintf("  %-32s %-8s team %-24s %10d\n", p.Account, p.Kind, p.Team, p.Amount)
	}
	return s
}
