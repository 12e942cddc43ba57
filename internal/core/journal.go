package core

import (
	"fmt"
	"strings"
	"time"
)

// Money moves in journals. A journal is one movement of money between
// accounts, written in the commit of the change that causes it: its
// postings sum to zero, so the sum of every account's balance is zero
// at every commit, and an account's balance is the sum of its postings.
//
// The accounts:
//   - a team's wallet (WalletAccount): what the team paid out is
//     negative there, what it got back positive;
//   - a block's escrow (EscrowAccount): what the operator was paid for
//     the block's hours, less what it paid back; it moves with the hours
//     when they are handed on, so a refund can never pay out more than
//     the hours brought in;
//   - the operator's revenue (RevenueAccount): spot charges, resale
//     fees, lending credits.
//
// A posting on a wallet says what the movement is to its team: a charge
// (money it spent), a refund (money it spent, given back) or a credit
// (income from others: a transfer's price, a resale, lending). Budgets
// count charges and refunds; credits only when the operator says so.
type Journal struct {
	ID      string
	Seq     int64 // the journal order, assigned by the store at commit
	Time    time.Time
	Kind    string // JournalPurchase, ...
	Subject string // the block, plan segment or job it is about
	// InstanceType is what the money paid for, for reports.
	InstanceType string
	Currency     string
	Postings     []Posting
}

// Posting is one line of a journal.
type Posting struct {
	Account string
	// Team is the team the posting is reported under: a wallet's team, an
	// escrow's holder (what its hours cost, in reports); on the revenue,
	// the team whose spot run paid it, else "".
	Team string
	// Kind is, on a wallet, LedgerCharge, LedgerRefund or LedgerCredit;
	// on an escrow PostingEscrow; on the revenue PostingRevenue.
	Kind string
	// Amount is signed, in minor units of the journal's currency: into
	// the account is positive.
	Amount int64
	// OnDemand is what the same instance-hours cost on demand, signed as
	// Amount (for savings reports); zero where it means nothing.
	OnDemand int64
	// Subject is what the line is about for its team when that is not the
	// journal's Subject (a transfer's price: the receiver's block for the
	// receiver, the holder's for the holder).
	Subject string
}

// Journal kinds.
const (
	JournalPurchase      = "purchase"
	JournalExtension     = "extension"
	JournalCancellation  = "cancellation"
	JournalPaymentFailed = "payment-failed"
	JournalTransfer      = "transfer"
	JournalResale        = "resale"
	JournalSpot          = "spot"
	JournalLending       = "lending"
	JournalMigrated      = "migrated" // an entry of the ledger before journals
)

// Posting kinds off wallets.
const (
	PostingEscrow  = "escrow"
	PostingRevenue = "revenue"
)

// Account names.
const RevenueAccount = "revenue"

// WalletAccount is a team's wallet.
func WalletAccount(team string) string { return "wallet:" + team }

// EscrowAccount is what block's hours were paid.
func EscrowAccount(block string) string { return "escrow:" + block }

// IsWallet reports whether account is a team's wallet.
func IsWallet(account string) bool { return strings.HasPrefix(account, "wallet:") }

// Check tells whether a journal may be stored: it names itself, has
// postings on named accounts, each wallet posting of its own team with a
// wallet kind, and its postings sum to zero. ErrUnbalanced is wrapped
// when they do not.
func (j Journal) Check() error {
	if j.ID == "" {
		return Invalidf("a journal has no id")
	}
	if j.Currency == "" {
		return Invalidf("journal %s has no currency", j.ID)
	}
	if len(j.Postings) < 2 {
		return fmt.Errorf("%w: journal %s has %d postings; money moves between two accounts at least", ErrUnbalanced, j.ID, len(j.Postings))
	}
	var sum int64
	for _, p := range j.Postings {
		switch {
		case p.Account == "":
			return Invalidf("journal %s: a posting has no account", j.ID)
		case IsWallet(p.Account):
			if p.Account != WalletAccount(p.Team) {
				return Invalidf("journal %s: posting on %s reported under team %q", j.ID, p.Account, p.Team)
			}
			if p.Kind != LedgerCharge && p.Kind != LedgerRefund && p.Kind != LedgerCredit {
				return Invalidf("journal %s: posting on %s is a %q; a wallet's are charge, refund or credit", j.ID, p.Account, p.Kind)
			}
		}
		sum += p.Amount
	}
	if sum != 0 {
		return fmt.Errorf("%w: journal %s's postings sum to %d, not 0", ErrUnbalanced, j.ID, sum)
	}
	return nil
}

// Entries are the journal's lines on team wallets, as a team's ledger
// shows them: the amount is what the team paid (charge) or got (refund,
// credit), never negative.
func (j Journal) Entries() []LedgerEntry {
	var out []LedgerEntry
	for i, p := range j.Postings {
		if !IsWallet(p.Account) {
			continue
		}
		amount, od := -p.Amount, -p.OnDemand
		if p.Kind != LedgerCharge {
			amount, od = p.Amount, p.OnDemand
		}
		subject := j.Subject
		if p.Subject != "" {
			subject = p.Subject
		}
		out = append(out, LedgerEntry{
			ID: fmt.Sprintf("%s.%d", j.ID, i), Journal: j.ID, Seq: j.Seq, Team: p.Team, Time: j.Time, Kind: p.Kind,
			Amount: Money{Minor: amount, Currency: j.Currency}, Subject: subject,
			InstanceType: j.InstanceType, OnDemand: Money{Minor: od, Currency: j.Currency},
		})
	}
	return out
}

// Spending is a wallet posting's part of its team's own spending, as a
// budget counts it: charges count positive and refunds negative; credits
// count negative only when credits is set (the operator's policy).
func (p Posting) Spending(credits bool) int64 {
	if !IsWallet(p.Account) || (p.Kind == LedgerCredit && !credits) {
		return 0
	}
	return -p.Amount
}

// Payment is a journal where team pays amount for what subject is (a
// block's hours into its escrow, or a spot run into the revenue).
func Payment(id, kind string, at time.Time, team, subject, instanceType string, amount, onDemand Money, to string) Journal {
	toKind := PostingEscrow
	if to == RevenueAccount {
		toKind = PostingRevenue
	}
	return Journal{ID: id, Time: at, Kind: kind, Subject: subject, InstanceType: instanceType, Currency: amount.Currency,
		Postings: []Posting{
			{Account: WalletAccount(team), Team: team, Kind: LedgerCharge, Amount: -amount.Minor, OnDemand: -onDemand.Minor},
			{Account: to, Team: team, Kind: toKind, Amount: amount.Minor, OnDemand: onDemand.Minor},
		}}
}

// Payout is a journal where team gets amount back from an account:
// a refund (of what it paid) or a credit (income), by kind.
func Payout(id, kind string, at time.Time, team, subject, instanceType string, amount, onDemand Money, from, fromTeam, entryKind string) Journal {
	fromKind := PostingEscrow
	if from == RevenueAccount {
		fromKind, fromTeam = PostingRevenue, ""
	}
	return Journal{ID: id, Time: at, Kind: kind, Subject: subject, InstanceType: instanceType, Currency: amount.Currency,
		Postings: []Posting{
			{Account: from, Team: fromTeam, Kind: fromKind, Amount: -amount.Minor, OnDemand: -onDemand.Minor},
			{Account: WalletAccount(team), Team: team, Kind: entryKind, Amount: amount.Minor, OnDemand: onDemand.Minor},
		}}
}
