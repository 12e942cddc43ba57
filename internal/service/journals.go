package service

import (
	"context"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The journals each way money moves writes (see core.Journal): the
// decision that moves it builds the journal, and the commit that stores
// the decision stores it, or neither is stored.

// purchaseJournal is team's payment of fee for block b's hours into b's
// escrow (a purchase, a plan's segment, a series' occurrence, or an
// extension when kind says so).
func purchaseJournal(kind string, at time.Time, b core.Block, fee, onDemand core.Money) core.Journal {
	return core.Payment(newID("jr"), kind, at, b.Team, b.ID, b.InstanceType, fee, onDemand, core.EscrowAccount(b.ID))
}

// refundJournal pays amount back to b's team from b's escrow.
func refundJournal(kind string, at time.Time, b core.Block, amount, onDemand core.Money) core.Journal {
	return core.Payout(newID("jr"), kind, at, b.Team, b.ID, b.InstanceType, amount, onDemand,
		core.EscrowAccount(b.ID), b.Team, core.LedgerRefund)
}

// transferJournal moves what the holder's block b was paid for its
// hours handed on (share, worth onDemand on demand) into the escrow of
// the received block, and the price, when set, from the receiver's
// wallet to the holder's, as the holder's income. It is nil when nothing
// moves.
func transferJournal(at time.Time, b, recv core.Block, share, onDemand, price core.Money) *core.Journal {
	if share.Minor == 0 && price.Minor == 0 {
		return nil
	}
	j := core.Journal{ID: newID("jr"), Time: at, Kind: core.JournalTransfer, Subject: recv.ID, InstanceType: b.InstanceType,
		Currency: share.Currency, Postings: []core.Posting{
			{Account: core.EscrowAccount(b.ID), Team: b.Team, Kind: core.PostingEscrow, Amount: -share.Minor, OnDemand: -onDemand.Minor},
			{Account: core.EscrowAccount(recv.ID), Team: recv.Team, Kind: core.PostingEscrow, Amount: share.Minor, OnDemand: onDemand.Minor},
		}}
	if price.Minor > 0 {
		j.Postings = append(j.Postings,
			core.Posting{Account: core.WalletAccount(recv.Team), Team: recv.Team, Kind: core.LedgerCharge, Amount: -price.Minor},
			core.Posting{Account: core.WalletAccount(b.Team), Team: b.Team, Kind: core.LedgerCredit, Amount: price.Minor, Subject: b.ID})
	}
	return &j
}

// resaleJournal pays the holder of released hours, out of its block's
// escrow, its share of them less the resale fee, which goes to the
// operator's revenue.
func resaleJournal(at time.Time, r store.Handover, instanceType string, share, credit, onDemand core.Money) core.Journal {
	fee := share.Minor - credit.Minor
	return core.Journal{ID: newID("jr"), Time: at, Kind: core.JournalResale, Subject: r.BlockID, InstanceType: instanceType,
		Currency: share.Currency, Postings: []core.Posting{
			{Account: core.EscrowAccount(r.BlockID), Team: r.Team, Kind: core.PostingEscrow, Amount: -share.Minor, OnDemand: -onDemand.Minor},
			{Account: core.WalletAccount(r.Team), Team: r.Team, Kind: core.LedgerCredit, Amount: credit.Minor},
			{Account: core.RevenueAccount, Kind: core.PostingRevenue, Amount: fee},
		}}
}

// refundBasis is what cancelling b may refund b's team (core.RefundBasis):
// what the team paid for b's hours, less what it had back, bounded by
// what b's escrow holds; and the start of the hours as first bought.
// Hours received for free were paid nothing. It reads the store: callers
// do not hold mu.
func (s *Service) refundBasis(ctx context.Context, b core.Block) (core.RefundBasis, error) {
	js, err := s.store.Journals(ctx, store.JournalFilter{Subject: b.ID})
	if err != nil {
		return core.RefundBasis{}, fmt.Errorf("reading what block %s was paid: %w", b.ID, err)
	}
	var paid, escrow int64
	for _, j := range js {
		for _, p := range j.Postings {
			switch p.Account {
			case core.EscrowAccount(b.ID):
				escrow += p.Amount
			case core.WalletAccount(b.Team):
				if p.Kind == core.LedgerCharge || p.Kind == core.LedgerRefund {
					paid -= p.Amount
				}
			}
		}
	}
	start, err := s.hoursStart(ctx, b)
	if err != nil {
		return core.RefundBasis{}, err
	}
	return core.RefundBasis{Paid: core.Money{Minor: max(min(paid, escrow), 0), Currency: b.Fee.Currency}, Start: start}, nil
}

// maxHandOns bounds the walk back along hand-overs.
const maxHandOns = 1000

// hoursStart is the start of b's hours as first bought: b's own start,
// or, for a block received by a transfer, that of the block the hours
// came from, and so on back.
func (s *Service) hoursStart(ctx context.Context, b core.Block) (time.Time, error) {
	start, id := b.Start, b.ID
	for range maxHandOns {
		hs, err := s.store.HandoversOf(ctx, id)
		if err != nil {
			return time.Time{}, fmt.Errorf("reading the hand-overs of block %s: %w", id, err)
		}
		from := ""
		for _, h := range hs {
			if h.ToBlockID == id {
				from = h.BlockID
			}
		}
		if from == "" {
			return start, nil
		}
		orig, err := s.store.GetBlock(ctx, from)
		if err != nil {
			return time.Time{}, fmt.Errorf("reading block %s, whose hours block %s received: %w", from, b.ID, err)
		}
		start, id = orig.Start, orig.ID
	}
	return start, nil
}
