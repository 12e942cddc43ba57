package core

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrOfferingUsed is returned when a quote that buys once (a block, a plan
// or an extension) was already bought. It is not a conflict: trying again
// on fresh state cannot succeed, so the service does not retry it.
var ErrOfferingUsed = errors.New("offering already used")

// errOfferingUnknown is every refusal of an id that does not decode or
// verify: the reason stays unsaid, so that a forger learns nothing.
var errOfferingUnknown = fmt.Errorf("%w: the offering id is malformed or was not issued by this server", ErrOfferingInvalid)

// Offering kinds, which are also the id prefixes.
const (
	KindBlock     = "cbo"
	KindExtension = "cbe"
)

// Offering is a priced, time-limited quote. Its ID encodes every term and
// is signed, so the server needs no state to honour it.
type Offering struct {
	ID           string
	Kind         string // KindBlock or KindExtension
	BlockID      string // for extensions: the block extended
	InstanceType string
	Count        int
	Zone         string
	Start        time.Time
	End          time.Time
	Fee          Money
	OnDemandFee  Money
	ExpiresAt    time.Time
	// Alternative marks, in a search's answer, an offering of another
	// duration than the one asked for (slightly shorter or longer). It is
	// not a term of the quote: the id does not carry it.
	Alternative bool
	// Nonce sets apart quotes of the same terms: an id buys once, so two
	// searches of the same terms within one second (or at one simulated
	// time) must not return the same id. Sign draws one when it is 0.
	Nonce uint64
}

// DurationHours is the offering's length in whole hours.
func (o *Offering) DurationHours() int { return int(o.End.Sub(o.Start) / time.Hour) }

// macSize is the length of the truncated HMAC-SHA256 in an id: 128 bits.
const macSize = 16

// Sign fills o.ID with the signed encoding of o's terms:
// <kind>-<base64url(terms)><base64url(mac)>, the terms a compact binary
// record (strings length-prefixed, numbers as varints, then the nonce in
// 8 bytes), so an id stays short enough to copy from a terminal. It draws
// o.Nonce first when it is 0.
func (o *Offering) Sign(secret []byte) {
	o.Nonce = nonceOr(o.Nonce)
	payload := o.appendTerms(nil)
	o.ID = o.Kind + "-" + base64.RawURLEncoding.EncodeToString(append(payload, mac(secret, o.Kind, payload)...))
}

func (o *Offering) appendTerms(b []byte) []byte {
	for _, s := range []string{o.BlockID, o.InstanceType, o.Zone, o.Fee.Currency} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, n := range []int64{int64(o.Count), o.Start.Unix(), o.End.Unix(), o.Fee.Minor, o.OnDemandFee.Minor, o.ExpiresAt.Unix()} {
		b = binary.AppendVarint(b, n)
	}
	return binary.LittleEndian.AppendUint64(b, o.Nonce)
}

// nonceSize is the length of a quote's nonce in its terms.
const nonceSize = 8

// nonceOr returns n, or a random nonzero nonce when n is 0. Randomness,
// unlike the clock, decides nothing here: it only makes ids distinct.
func nonceOr(n uint64) uint64 {
	for n == 0 {
		var b [nonceSize]byte
		rand.Read(b[:]) // never fails (crypto/rand)
		n = binary.LittleEndian.Uint64(b[:])
	}
	return n
}

// readNonce reads the nonce that ends a quote's terms. Ids signed before
// quotes had one end without: they read as nonce 0.
func (d *termDecoder) readNonce() uint64 {
	switch len(d.p) {
	case 0:
		return 0
	case nonceSize:
		n := binary.LittleEndian.Uint64(d.p)
		d.p = d.p[nonceSize:]
		return n
	}
	d.bad = true
	return 0
}

// VerifyOffering decodes and checks an offering id: ErrOfferingInvalid when
// it is malformed, of another kind or not signed with secret, and
// ErrOfferingExpired when now is past its expiry. Its terms must also be
// ones this server quotes (see checkTerms), so that a quote forged with a
// leaked key still buys nothing that a real one could not. With
// ErrOfferingExpired it returns the verified terms too: what an expired
// quote bought can still be answered to a retry of its purchase.
func VerifyOffering(secret []byte, id, kind string, now time.Time) (Offering, error) {
	payload, ok := signedPayload(secret, id, kind)
	if !ok {
		return Offering{}, errOfferingUnknown
	}
	o, ok := decodeOfferingTerms(payload)
	if !ok {
		return Offering{}, errOfferingUnknown
	}
	o.ID, o.Kind = id, kind
	if !now.Before(o.ExpiresAt) {
		return o, fmt.Errorf("%w: the quote expired at %s", ErrOfferingExpired, o.ExpiresAt.Format(time.RFC3339))
	}
	if err := o.checkTerms(now); err != nil {
		return o, err
	}
	return o, nil
}

// checkTerms refuses terms that no quote of this server carries: no
// instances, times off the hour, an empty range, a fee that is not
// positive, or a start already past at now.
func (o *Offering) checkTerms(now time.Time) error {
	if o.Kind == KindExtension && o.BlockID == "" {
		return fmt.Errorf("%w: the extension quote names no block", ErrOfferingInvalid)
	}
	if err := checkQuoteTerms(o.Count, o.Start, o.End, o.Fee); err != nil {
		return err
	}
	return checkQuoteStart(o.Start, now)
}

// checkQuoteTerms refuses the terms of a quote (or of one segment of a
// plan quote) that no search of this server returns.
func checkQuoteTerms(count int, start, end time.Time, fee Money) error {
	switch {
	case count < 1:
		return fmt.Errorf("%w: the quote is for %d instances", ErrOfferingInvalid, count)
	case !onTheHour(start):
		return fmt.Errorf("%w: the quote starts at %s, not on the hour", ErrOfferingInvalid, start.Format(time.RFC3339))
	case !onTheHour(end):
		return fmt.Errorf("%w: the quote ends at %s, not on the hour", ErrOfferingInvalid, end.Format(time.RFC3339))
	case !end.After(start):
		return fmt.Errorf("%w: the quote ends at %s, not after its start %s", ErrOfferingInvalid, end.Format(time.RFC3339), start.Format(time.RFC3339))
	case fee.Minor <= 0:
		return fmt.Errorf("%w: the quote's fee %s %s is not positive", ErrOfferingInvalid, fee, fee.Currency)
	}
	return nil
}

// checkQuoteStart refuses a quote whose start has passed at now: the hours
// it sells are gone, whatever its expiry says.
func checkQuoteStart(start, now time.Time) error {
	if start.Before(now) {
		return fmt.Errorf("%w: the quote starts at %s, which has passed", ErrOfferingExpired, start.Format(time.RFC3339))
	}
	return nil
}

func onTheHour(t time.Time) bool { return t.Unix()%3600 == 0 }

// signedPayload returns the terms of id, of kind, when its signature is
// secret's.
func signedPayload(secret []byte, id, kind string) ([]byte, bool) {
	payload, sig, ok := splitID(id, kind)
	if !ok || !hmac.Equal(sig, mac(secret, kind, payload)) {
		return nil, false
	}
	return payload, true
}

// splitID decodes id, of kind, into its terms and its signature, without
// checking the signature.
func splitID(id, kind string) (payload, sig []byte, ok bool) {
	rest, ok := strings.CutPrefix(id, kind+"-")
	if !ok {
		return nil, nil, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest) // canonical only: one id per offering
	if err != nil || len(raw) <= macSize {
		return nil, nil, false
	}
	return raw[:len(raw)-macSize], raw[len(raw)-macSize:], true
}

// decodeOfferingTerms reads what appendTerms wrote.
func decodeOfferingTerms(payload []byte) (Offering, bool) {
	d := termDecoder{p: payload}
	var strs [4]string
	for i := range strs {
		strs[i] = d.str()
	}
	var nums [6]int64
	for i := range nums {
		nums[i] = d.int()
	}
	nonce := d.readNonce()
	if d.bad || len(d.p) != 0 {
		return Offering{}, false
	}
	return Offering{
		BlockID: strs[0], InstanceType: strs[1], Zone: strs[2],
		Count: int(nums[0]),
		Start: time.Unix(nums[1], 0).UTC(), End: time.Unix(nums[2], 0).UTC(),
		Fee:         Money{Minor: nums[3], Currency: strs[3]},
		OnDemandFee: Money{Minor: nums[4], Currency: strs[3]},
		ExpiresAt:   time.Unix(nums[5], 0).UTC(),
		Nonce:       nonce,
	}, true
}

// OfferingExpiry returns when the quote of id (a block, extension, plan or series
// offering) expires, without checking its signature: it is for the store,
// which keeps the ids of used quotes until then and sees only ids that
// the service verified.
func OfferingExpiry(id string) (time.Time, error) {
	kind, _, _ := strings.Cut(id, "-")
	payload, _, ok := splitID(id, kind)
	if ok {
		switch kind {
		case KindBlock, KindExtension:
			if o, ok := decodeOfferingTerms(payload); ok {
				return o.ExpiresAt, nil
			}
		case KindPlan:
			if o, ok := decodePlanTerms(payload); ok {
				return o.ExpiresAt, nil
			}
		case KindSeries:
			if o, ok := decodeSeriesTerms(payload); ok {
				return o.ExpiresAt, nil
			}
		}
	}
	return time.Time{}, errOfferingUnknown
}

// mac signs the kind too, so an id of one kind never verifies as another.
func mac(secret []byte, kind string, payload []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(kind + "\x00"))
	h.Write(payload)
	return h.Sum(nil)[:macSize]
}
