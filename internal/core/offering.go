package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"
)

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
}

// DurationHours is the offering's length in whole hours.
func (o *Offering) DurationHours() int { return int(o.End.Sub(o.Start) / time.Hour) }

// macSize is the length of the truncated HMAC-SHA256 in an id: 128 bits.
const macSize = 16

// Sign fills o.ID with the signed encoding of o's terms:
// <kind>-<base64url(terms)><base64url(mac)>, the terms a compact binary
// record (strings length-prefixed, numbers as varints), so an id stays
// short enough to copy from a terminal.
func (o *Offering) Sign(secret []byte) {
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
	return b
}

// VerifyOffering decodes and checks an offering id: ErrOfferingInvalid when
// it is malformed, of another kind or not signed with secret, and
// ErrOfferingExpired when now is past its expiry.
func VerifyOffering(secret []byte, id, kind string, now time.Time) (Offering, error) {
	rest, ok := strings.CutPrefix(id, kind+"-")
	if !ok {
		return Offering{}, ErrOfferingInvalid
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest) // canonical only: one id per offering
	if err != nil || len(raw) <= macSize {
		return Offering{}, ErrOfferingInvalid
	}
	payload, sig := raw[:len(raw)-macSize], raw[len(raw)-macSize:]
	if !hmac.Equal(sig, mac(secret, kind, payload)) {
		return Offering{}, ErrOfferingInvalid
	}
	o := Offering{ID: id, Kind: kind}
	var strs [4]string
	for i := range strs {
		n, k := binary.Uvarint(payload)
		if k <= 0 || uint64(len(payload)-k) < n {
			return Offering{}, ErrOfferingInvalid
		}
		strs[i], payload = string(payload[k:k+int(n)]), payload[k+int(n):]
	}
	var nums [6]int64
	for i := range nums {
		v, k := binary.Varint(payload)
		if k <= 0 {
			return Offering{}, ErrOfferingInvalid
		}
		nums[i], payload = v, payload[k:]
	}
	if len(payload) != 0 {
		return Offering{}, ErrOfferingInvalid
	}
	o.BlockID, o.InstanceType, o.Zone = strs[0], strs[1], strs[2]
	o.Count = int(nums[0])
	o.Start, o.End = time.Unix(nums[1], 0).UTC(), time.Unix(nums[2], 0).UTC()
	o.Fee = Money{Minor: nums[3], Currency: strs[3]}
	o.OnDemandFee = Money{Minor: nums[4], Currency: strs[3]}
	o.ExpiresAt = time.Unix(nums[5], 0).UTC()
	if !now.Before(o.ExpiresAt) {
		return o, ErrOfferingExpired
	}
	return o, nil
}

// mac signs the kind too, so an id of one kind never verifies as another.
func mac(secret []byte, kind string, payload []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(kind + "\x00"))
	h.Write(payload)
	return h.Sum(nil)[:macSize]
}
