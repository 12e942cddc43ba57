package core

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// KindPlan is the kind, and id prefix, of plan offerings.
const KindPlan = "tpo"

// PlanOffering is a priced, time-limited quote for a training plan: Count
// instances of InstanceType in Zone over one or more segments. Like a
// block offering, its ID encodes every term and is signed.
type PlanOffering struct {
	ID           string
	Target       string
	InstanceType string
	Count        int
	Zone         string
	Segments     []PlanSegment // in time order, not overlapping
	ExpiresAt    time.Time
	// Nonce sets apart quotes of the same terms, as Offering.Nonce does.
	Nonce uint64
}

// PlanSegment is one window of a plan offering, priced on its own.
type PlanSegment struct {
	Start, End  time.Time
	Fee         Money
	OnDemandFee Money
}

// DurationHours is the segment's length in whole hours.
func (s PlanSegment) DurationHours() int { return int(s.End.Sub(s.Start) / time.Hour) }

// DurationHours is the plan's total length: the sum of its segments'.
func (o *PlanOffering) DurationHours() int {
	n := 0
	for _, s := range o.Segments {
		n += s.DurationHours()
	}
	return n
}

// Fee is the sum of the segments' fees.
func (o *PlanOffering) Fee() Money { return o.sum(func(s PlanSegment) Money { return s.Fee }) }

// OnDemandFee is what the same instance-hours cost on demand.
func (o *PlanOffering) OnDemandFee() Money {
	return o.sum(func(s PlanSegment) Money { return s.OnDemandFee })
}

func (o *PlanOffering) sum(f func(PlanSegment) Money) Money {
	var m Money
	for _, s := range o.Segments {
		v := f(s)
		m.Minor += v.Minor
		m.Currency = v.Currency
	}
	return m
}

// End is the end of the last segment.
func (o *PlanOffering) End() time.Time {
	if len(o.Segments) == 0 {
		return time.Time{}
	}
	return o.Segments[len(o.Segments)-1].End
}

// Sign fills o.ID with the signed encoding of o's terms:
// tpo-<base64url(terms)><base64url(mac)>. The terms are a compact binary
// record: target, type, zone and currency length-prefixed, then count,
// expiry, the first start and the number of segments, and per segment the
// hours since the previous segment's end (0 for the first), its hours, its
// fee and its on-demand fee, all varints, then the nonce in 8 bytes
// (drawn first when it is 0). Times are whole hours apart, so the id of a
// four-segment plan stays about 160 characters.
func (o *PlanOffering) Sign(secret []byte) {
	o.Nonce = nonceOr(o.Nonce)
	payload := o.appendTerms(nil)
	o.ID = KindPlan + "-" + base64.RawURLEncoding.EncodeToString(append(payload, mac(secret, KindPlan, payload)...))
}

func (o *PlanOffering) appendTerms(b []byte) []byte {
	currency := ""
	if len(o.Segments) > 0 {
		currency = o.Segments[0].Fee.Currency
	}
	for _, s := range []string{o.Target, o.InstanceType, o.Zone, currency} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var first int64
	if len(o.Segments) > 0 {
		first = o.Segments[0].Start.Unix()
	}
	for _, n := range []int64{int64(o.Count), o.ExpiresAt.Unix(), first} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.AppendUvarint(b, uint64(len(o.Segments)))
	prev := time.Unix(first, 0)
	for _, s := range o.Segments {
		b = binary.AppendVarint(b, int64(s.Start.Sub(prev)/time.Hour))
		b = binary.AppendVarint(b, int64(s.DurationHours()))
		b = binary.AppendVarint(b, s.Fee.Minor)
		b = binary.AppendVarint(b, s.OnDemandFee.Minor)
		prev = s.End
	}
	return binary.LittleEndian.AppendUint64(b, o.Nonce)
}

// VerifyPlanOffering decodes and checks a plan offering id:
// ErrOfferingInvalid when it is malformed, of another kind or not signed
// with secret, and ErrOfferingExpired when now is past its expiry. Its
// terms must also be ones this server quotes, as VerifyOffering checks
// for a block's, segment by segment.
func VerifyPlanOffering(secret []byte, id string, now time.Time) (PlanOffering, error) {
	payload, ok := signedPayload(secret, id, KindPlan)
	if !ok {
		return PlanOffering{}, errOfferingUnknown
	}
	o, ok := decodePlanTerms(payload)
	if !ok {
		return PlanOffering{}, errOfferingUnknown
	}
	o.ID = id
	if !now.Before(o.ExpiresAt) {
		return o, fmt.Errorf("%w: the quote expired at %s", ErrOfferingExpired, o.ExpiresAt.Format(time.RFC3339))
	}
	for i, sg := range o.Segments {
		if err := checkQuoteTerms(o.Count, sg.Start, sg.End, sg.Fee); err != nil {
			return o, fmt.Errorf("segment %d: %w", i+1, err)
		}
	}
	if err := checkQuoteStart(o.Segments[0].Start, now); err != nil {
		return o, err
	}
	return o, nil
}

// decodePlanTerms reads what appendTerms wrote; signed payloads are ours,
// but the decoder still refuses anything out of shape.
func decodePlanTerms(p []byte) (PlanOffering, bool) {
	d := termDecoder{p: p}
	var strs [4]string
	for i := range strs {
		strs[i] = d.str()
	}
	count, expires, first := d.int(), d.int(), d.int()
	n := d.uint()
	if d.bad || n < 1 || n > MaxPlanSegments {
		return PlanOffering{}, false
	}
	o := PlanOffering{Target: strs[0], InstanceType: strs[1], Zone: strs[2], Count: int(count),
		ExpiresAt: time.Unix(expires, 0).UTC()}
	at := time.Unix(first, 0).UTC()
	for range n {
		gap, hours, fee, onDemand := d.int(), d.int(), d.int(), d.int()
		if d.bad || gap < 0 || hours < 1 || gap > 1<<20 || hours > 1<<20 {
			return PlanOffering{}, false
		}
		start := at.Add(time.Duration(gap) * time.Hour)
		at = start.Add(time.Duration(hours) * time.Hour)
		o.Segments = append(o.Segments, PlanSegment{Start: start, End: at,
			Fee: Money{Minor: fee, Currency: strs[3]}, OnDemandFee: Money{Minor: onDemand, Currency: strs[3]}})
	}
	o.Nonce = d.readNonce()
	return o, !d.bad && len(d.p) == 0
}

// termDecoder reads a payload of varints and length-prefixed strings,
// remembering the first malformed read.
type termDecoder struct {
	p   []byte
	bad bool
}

func (d *termDecoder) str() string {
	n := d.uint()
	if d.bad || uint64(len(d.p)) < n {
		d.bad = true
		return ""
	}
	s := string(d.p[:n])
	d.p = d.p[n:]
	return s
}

func (d *termDecoder) uint() uint64 {
	v, k := binary.Uvarint(d.p)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.p = d.p[k:]
	return v
}

func (d *termDecoder) int() int64 {
	v, k := binary.Varint(d.p)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.p = d.p[k:]
	return v
}
