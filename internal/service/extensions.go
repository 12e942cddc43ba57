package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/store"
)

// extensionToken is the idempotency key of the extension that offeringID
// buys. An extension's commit stores, with the block's new end, a record
// of the block's team under this key: the durable answer to "did this
// offering extend this block, and when", which a retry reads (Extend).
// The used offering's row could not say when, nor which team, and is
// pruned once the quote expires. At 74 characters the key is longer than
// any client token a front accepts (64 at most), so no purchase's token
// can take it.
func extensionToken(offeringID string) string {
	return "extension-" + offeringHash(offeringID)
}

// offeringHash is the hex SHA-256 of an offering id: the request hash of
// an extension's record, whose whole request is the offering.
func offeringHash(offeringID string) string {
	sum := sha256.Sum256([]byte(offeringID))
	return hex.EncodeToString(sum[:])
}

// extensionRecord is the record that off extended b at now, to the
// second as the store keeps it, so that the first answer and a retry's
// say the same time.
func extensionRecord(b core.Block, off core.Offering, now time.Time) store.IdempotencyRecord {
	return store.IdempotencyRecord{
		Team: b.Team, ClientToken: extensionToken(off.ID), RequestHash: offeringHash(off.ID),
		Subject: b.ID, CreatedAt: time.Unix(now.Unix(), 0).UTC(),
	}
}

// extensionOf is the extension that off bought at bought, with b as it
// stands now.
func extensionOf(b core.Block, off core.Offering, bought time.Time) contract.Extension {
	return contract.Extension{Block: b, OfferingID: off.ID, Start: off.Start, End: off.End, Fee: off.Fee, PurchasedAt: bought}
}

// extensionBought returns the extension that the verified offering off
// bought, when it extended its block and the block is one of team's
// (any team's for ""): found is false otherwise, another team's block
// included, so that a replay of another team's offering learns nothing
// that buying it would not say (not found).
func (s *Service) extensionBought(ctx context.Context, team string, off core.Offering) (contract.Extension, bool, error) {
	b, err := s.GetBlock(ctx, team, off.BlockID)
	if errors.Is(err, core.ErrNotFound) {
		return contract.Extension{}, false, nil
	}
	if err != nil {
		return contract.Extension{}, false, err
	}
	rec, err := s.store.Idempotency(ctx, b.Team, extensionToken(off.ID))
	if errors.Is(err, store.ErrNotFound) {
		return contract.Extension{}, false, nil
	}
	if err != nil {
		return contract.Extension{}, false, fmt.Errorf("looking up the extension of block %s by its offering: %w", b.ID, err)
	}
	if rec.Subject != b.ID || rec.RequestHash != offeringHash(off.ID) {
		// Not written by an extension of this block: no record of one.
		return contract.Extension{}, false, nil
	}
	return extensionOf(b, off, rec.CreatedAt), true, nil
}
