package core

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func sampleOffering() Offering {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	return Offering{Kind: KindBlock, InstanceType: "h100.8x", Count: 2, Zone: "zone-a", Start: start, End: start.Add(48 * time.Hour),
		Fee: Money{Minor: 707808, Currency: "USD"}, OnDemandFee: Money{Minor: 943872, Currency: "USD"}, ExpiresAt: start.Add(-time.Hour)}
}

func TestOfferingRoundTrip(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := sampleOffering()
	o.Sign(secret)
	if len(o.ID) > 120 {
		t.Errorf("offering id is %d characters, want a short one: %s", len(o.ID), o.ID)
	}
	got, err := VerifyOffering(secret, o.ID, KindBlock, o.ExpiresAt.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(o, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestOfferingRefused(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := sampleOffering()
	o.Sign(secret)
	before := o.ExpiresAt.Add(-time.Minute)
	flip := func(i int) string {
		b := []byte(o.ID)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	ext := o
	ext.Kind, ext.BlockID = KindExtension, ""
	ext.Sign(secret)
	tests := map[string]struct {
		id     string
		kind   string
		secret string
		now    time.Time
		want   error
	}{
		"expired":              {id: o.ID, kind: KindBlock, now: o.ExpiresAt, want: ErrOfferingExpired},
		"payload tampered":     {id: flip(8), kind: KindBlock, now: before, want: ErrOfferingInvalid},
		"signature tampered":   {id: flip(len(o.ID) - 3), kind: KindBlock, now: before, want: ErrOfferingInvalid},
		"other server's":       {id: o.ID, kind: KindBlock, secret: "another secret of 32 bytes......", now: before, want: ErrOfferingInvalid},
		"wrong kind":           {id: o.ID, kind: KindExtension, now: before, want: ErrOfferingInvalid},
		"kind relabelled":      {id: "cbe-" + o.ID[4:], kind: KindExtension, now: before, want: ErrOfferingInvalid},
		"extension as a block": {id: "cbo-" + ext.ID[4:], kind: KindBlock, now: before, want: ErrOfferingInvalid},
		"truncated":            {id: o.ID[:20], kind: KindBlock, now: before, want: ErrOfferingInvalid},
		"not base64":           {id: "cbo-!!!!", kind: KindBlock, now: before, want: ErrOfferingInvalid},
		"empty":                {id: "", kind: KindBlock, now: before, want: ErrOfferingInvalid},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := secret
			if tc.secret != "" {
				s = []byte(tc.secret)
			}
			if _, err := VerifyOffering(s, tc.id, tc.kind, tc.now); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzVerifyOffering: no input panics, and nothing verifies unless signed.
func FuzzVerifyOffering(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := sampleOffering()
	o.Sign(secret)
	f.Add(o.ID)
	f.Add("cbo-")
	f.Add("cbo-AAAA")
	f.Fuzz(func(t *testing.T, id string) {
		got, err := VerifyOffering(secret, id, KindBlock, time.Time{})
		if err == nil && id != o.ID {
			t.Fatalf("unsigned id %q verified as %+v", id, got)
		}
	})
}

// TestExpiredOfferingKeepsItsTerms: an expired quote, past its expiry or
// its start, is refused with its verified terms; a forged one with none.
func TestExpiredOfferingKeepsItsTerms(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := sampleOffering()
	o.Kind, o.BlockID = KindExtension, "cb-1"
	o.Sign(secret)
	late := o // a quote whose hours start before it expires
	late.ExpiresAt, late.Nonce = o.Start.Add(2*time.Hour), 0
	late.Sign(secret)
	for name, tc := range map[string]struct {
		o   Offering
		now time.Time
	}{
		"past its expiry": {o, o.ExpiresAt},
		"past its start":  {late, o.Start.Add(time.Hour)},
	} {
		got, err := VerifyOffering(secret, tc.o.ID, KindExtension, tc.now)
		if !errors.Is(err, ErrOfferingExpired) {
			t.Fatalf("%s: %v, want expired", name, err)
		}
		if diff := cmp.Diff(tc.o, got); diff != "" {
			t.Errorf("%s: the terms (-want +got):\n%s", name, diff)
		}
	}
	if got, err := VerifyOffering([]byte("another secret of 32 bytes......"), o.ID, KindExtension, o.ExpiresAt); !errors.Is(err, ErrOfferingInvalid) || got.ID != "" {
		t.Errorf("another server's expired quote: %+v, %v; want invalid and no terms", got, err)
	}
}
