package core

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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

// offeringTerms is the signed payload. Short keys keep ids compact.
type offeringTerms struct {
	Kind     string `json:"k"`
	Block    string `json:"b,omitempty"`
	Type     string `json:"t"`
	Count    int    `json:"n"`
	Zone     string `json:"z"`
	Start    int64  `json:"s"`
	End      int64  `json:"e"`
	Fee      int64  `json:"f"`
	OnDemand int64  `json:"o"`
	Currency string `json:"c"`
	Expires  int64  `json:"x"`
}

// Sign fills o.ID with the signed encoding of o's terms.
func (o *Offering) Sign(secret []byte) {
	terms := offeringTerms{
		Kind: o.Kind, Block: o.BlockID, Type: o.InstanceType, Count: o.Count, Zone: o.Zone,
		Start: o.Start.Unix(), End: o.End.Unix(), Fee: o.Fee.Minor, OnDemand: o.OnDemandFee.Minor,
		Currency: o.Fee.Currency, Expires: o.ExpiresAt.Unix(),
	}
	payload, _ := json.Marshal(terms) // a struct of strings and ints always marshals
	enc := base64.RawURLEncoding
	o.ID = o.Kind + "-" + enc.EncodeToString(payload) + "." + enc.EncodeToString(mac(secret, payload))
}

// VerifyOffering decodes and checks an offering id: ErrOfferingInvalid when
// it is malformed, of another kind or not signed with secret, and
// ErrOfferingExpired when now is past its expiry.
func VerifyOffering(secret []byte, id, kind string, now time.Time) (Offering, error) {
	rest, ok := strings.CutPrefix(id, kind+"-")
	if !ok {
		return Offering{}, ErrOfferingInvalid
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return Offering{}, ErrOfferingInvalid
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	gotMAC, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(gotMAC, mac(secret, payload)) {
		return Offering{}, ErrOfferingInvalid
	}
	var t offeringTerms
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil || t.Kind != kind {
		return Offering{}, ErrOfferingInvalid
	}
	o := Offering{
		ID: id, Kind: t.Kind, BlockID: t.Block, InstanceType: t.Type, Count: t.Count, Zone: t.Zone,
		Start: time.Unix(t.Start, 0).UTC(), End: time.Unix(t.End, 0).UTC(),
		Fee:         Money{Minor: t.Fee, Currency: t.Currency},
		OnDemandFee: Money{Minor: t.OnDemand, Currency: t.Currency},
		ExpiresAt:   time.Unix(t.Expires, 0).UTC(),
	}
	if !now.Before(o.ExpiresAt) {
		return o, ErrOfferingExpired
	}
	return o, nil
}

func mac(secret, payload []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(payload)
	return h.Sum(nil)
}
