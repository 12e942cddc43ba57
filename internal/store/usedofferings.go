package store

import (
	"crypto/sha256"
	"fmt"
	"time"

	"capblock/internal/core"
)

// UsedOffering is the row a commit stores for an offering it consumes:
// the SHA-256 of the id (ids are long; the hash keys them in 32 bytes) and
// the quote's expiry, until which the row must be kept.
type UsedOffering struct {
	Hash      []byte
	ExpiresAt time.Time
}

// UsedOfferings returns the rows of a change's offerings, or an error
// wrapping core.ErrInvalidArgument when an id is not an offering id or
// comes twice.
func UsedOfferings(ids []string) ([]UsedOffering, error) {
	out := make([]UsedOffering, 0, len(ids))
	seen := make(map[[sha256.Size]byte]bool, len(ids))
	for _, id := range ids {
		h := sha256.Sum256([]byte(id))
		if seen[h] {
			return nil, core.Invalidf("offering %s comes twice in one change", ShortOfferingID(id))
		}
		seen[h] = true
		exp, err := core.OfferingExpiry(id)
		if err != nil {
			return nil, core.Invalidf("offering %s: %v", ShortOfferingID(id), err)
		}
		out = append(out, UsedOffering{Hash: h[:], ExpiresAt: exp})
	}
	return out, nil
}

// OfferingHash is the key of an offering id in the used offerings.
func OfferingHash(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// OfferingUsedError is the error of a commit that consumes an offering
// already used.
func OfferingUsedError(id string) error {
	return fmt.Errorf("offering %s was already used: %w", ShortOfferingID(id), core.ErrOfferingUsed)
}

// ShortOfferingID shortens an offering id (often 100 characters or more)
// for messages: its kind and first characters identify it well enough.
func ShortOfferingID(id string) string {
	const keep = 16
	if len(id) <= keep+1 {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("%q…", id[:keep])
}
