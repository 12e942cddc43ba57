package core

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// KindSeries is the kind, and id prefix, of series offerings.
const KindSeries = "cso"

// SeriesOffering is a priced, time-limited quote for a series: Count
// instances of InstanceType in Zone at each occurrence of a schedule.
// Occurrences lists every occurrence with whether it fits; the signed ID
// carries the ones that fit and are bought (every one, or, for a partial
// search, those that fit). ID is empty when nothing can be bought: an
// all-or-nothing search where an occurrence does not fit, or none fits.
type SeriesOffering struct {
	ID           string
	InstanceType string
	Count        int
	Zone         string
	Schedule     Schedule
	Occurrences  []SeriesOccurrence
	ExpiresAt    time.Time
	// Nonce sets apart quotes of the same terms, as Offering.Nonce does.
	Nonce uint64
}

// SeriesOccurrence is one occurrence of a series offering.
type SeriesOccurrence struct {
	Start, End  time.Time
	Fits        bool
	Reason      string // why it does not fit; not a term of the quote
	Fee         Money  // when it fits
	OnDemandFee Money
}

// DurationHours is the occurrence's length in whole hours.
func (o SeriesOccurrence) DurationHours() int { return int(o.End.Sub(o.Start) / time.Hour) }

// Bought returns the occurrences the quote buys: those that fit.
func (o *SeriesOffering) Bought() []SeriesOccurrence {
	var out []SeriesOccurrence
	for _, oc := range o.Occurrences {
		if oc.Fits {
			out = append(out, oc)
		}
	}
	return out
}

// Fee is the sum of the fees of the occurrences bought.
func (o *SeriesOffering) Fee() Money {
	m := Money{}
	for _, oc := range o.Bought() {
		m.Minor += oc.Fee.Minor
		m.Currency = oc.Fee.Currency
	}
	return m
}

// OnDemandFee is what the instance-hours bought cost on demand.
func (o *SeriesOffering) OnDemandFee() Money {
	m := Money{}
	for _, oc := range o.Bought() {
		m.Minor += oc.OnDemandFee.Minor
		m.Currency = oc.OnDemandFee.Currency
	}
	return m
}

// Sign fills o.ID with the signed encoding of the terms it buys, as a
// plan offering's (type, zone, currency and the schedule's zone and days
// length-prefixed, then count, expiry, first start and the occurrences
// bought, each as the hours since the previous one's end, its hours, fee
// and on-demand fee), or leaves it empty when no occurrence fits.
func (o *SeriesOffering) Sign(secret []byte) {
	if len(o.Bought()) == 0 {
		o.ID = ""
		return
	}
	o.Nonce = nonceOr(o.Nonce)
	payload := o.appendTerms(nil)
	o.ID = KindSeries + "-" + base64.RawURLEncoding.EncodeToString(append(payload, mac(secret, KindSeries, payload)...))
}

func (o *SeriesOffering) appendTerms(b []byte) []byte {
	bought := o.Bought()
	sc := o.Schedule
	strs := []string{o.InstanceType, o.Zone, bought[0].Fee.Currency, sc.TimeZone, sc.StartLocal, sc.EndLocal, sc.From, sc.To}
	for _, s := range strs {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var days uint64
	for _, d := range sc.Days {
		days |= 1 << uint(d)
	}
	b = binary.AppendUvarint(b, days)
	first := bought[0].Start
	for _, n := range []int64{int64(o.Count), o.ExpiresAt.Unix(), first.Unix()} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.AppendUvarint(b, uint64(len(bought)))
	prev := first
	for _, oc := range bought {
		b = binary.AppendVarint(b, int64(oc.Start.Sub(prev)/time.Hour))
		b = binary.AppendVarint(b, int64(oc.DurationHours()))
		b = binary.AppendVarint(b, oc.Fee.Minor)
		b = binary.AppendVarint(b, oc.OnDemandFee.Minor)
		prev = oc.End
	}
	return binary.LittleEndian.AppendUint64(b, o.Nonce)
}

// VerifySeriesOffering decodes and checks a series offering id, as
// VerifyPlanOffering does a plan's: the offering returned holds only the
// occurrences it buys, each a term this server quotes.
func VerifySeriesOffering(secret []byte, id string, now time.Time) (SeriesOffering, error) {
	payload, ok := signedPayload(secret, id, KindSeries)
	if !ok {
		return SeriesOffering{}, errOfferingUnknown
	}
	o, ok := decodeSeriesTerms(payload)
	if !ok {
		return SeriesOffering{}, errOfferingUnknown
	}
	o.ID = id
	if !now.Before(o.ExpiresAt) {
		return o, fmt.Errorf("%w: the quote expired at %s", ErrOfferingExpired, o.ExpiresAt.Format(time.RFC3339))
	}
	for i, oc := range o.Occurrences {
		if err := checkQuoteTerms(o.Count, oc.Start, oc.End, oc.Fee); err != nil {
			return o, fmt.Errorf("occurrence %d: %w", i+1, err)
		}
	}
	if err := checkQuoteStart(o.Occurrences[0].Start, now); err != nil {
		return o, err
	}
	return o, nil
}

func decodeSeriesTerms(p []byte) (SeriesOffering, bool) {
	d := termDecoder{p: p}
	var strs [8]string
	for i := range strs {
		strs[i] = d.str()
	}
	days := d.uint()
	count, expires, first := d.int(), d.int(), d.int()
	n := d.uint()
	if d.bad || n < 1 || n > MaxSeriesOccurrences || days == 0 || days >= 1<<7 {
		return SeriesOffering{}, false
	}
	o := SeriesOffering{InstanceType: strs[0], Zone: strs[1], Count: int(count), ExpiresAt: time.Unix(expires, 0).UTC(),
		Schedule: Schedule{TimeZone: strs[3], StartLocal: strs[4], EndLocal: strs[5], From: strs[6], To: strs[7]}}
	for wd := time.Sunday; wd <= time.Saturday; wd++ {
		if days&(1<<uint(wd)) != 0 {
			o.Schedule.Days = append(o.Schedule.Days, wd)
		}
	}
	at := time.Unix(first, 0).UTC()
	for range n {
		gap, hours, fee, onDemand := d.int(), d.int(), d.int(), d.int()
		if d.bad || gap < 0 || hours < 1 || gap > 1<<20 || hours > 1<<20 {
			return SeriesOffering{}, false
		}
		start := at.Add(time.Duration(gap) * time.Hour)
		at = start.Add(time.Duration(hours) * time.Hour)
		o.Occurrences = append(o.Occurrences, SeriesOccurrence{Start: start, End: at, Fits: true,
			Fee: Money{Minor: fee, Currency: strs[2]}, OnDemandFee: Money{Minor: onDemand, Currency: strs[2]}})
	}
	o.Nonce = d.readNonce()
	return o, !d.bad && len(d.p) == 0
}
