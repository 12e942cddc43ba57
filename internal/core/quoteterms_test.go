package core

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestOfferingTermsRefused signs quotes that no search returns, as one
// could with a leaked signing key: each is refused although its signature
// verifies.
func TestOfferingTermsRefused(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	base := sampleOffering() // starts 2026-12-02 10:00, expires an hour before
	now := base.ExpiresAt.Add(-time.Minute)
	tests := map[string]struct {
		change func(*Offering)
		now    time.Time
		want   error
		detail string
	}{
		"as quoted":           {change: func(*Offering) {}},
		"start already past":  {change: func(o *Offering) { o.ExpiresAt = o.Start.Add(time.Hour) }, now: base.Start.Add(time.Minute), want: ErrOfferingExpired, detail: "has passed"},
		"start off the hour":  {change: func(o *Offering) { o.Start = o.Start.Add(30 * time.Minute) }, want: ErrOfferingInvalid, detail: "not on the hour"},
		"end off the hour":    {change: func(o *Offering) { o.End = o.End.Add(time.Second) }, want: ErrOfferingInvalid, detail: "not on the hour"},
		"end before start":    {change: func(o *Offering) { o.End = o.Start.Add(-time.Hour) }, want: ErrOfferingInvalid, detail: "not after its start"},
		"zero fee":            {change: func(o *Offering) { o.Fee.Minor = 0 }, want: ErrOfferingInvalid, detail: "not positive"},
		"negative fee":        {change: func(o *Offering) { o.Fee.Minor = -100 }, want: ErrOfferingInvalid, detail: "not positive"},
		"no instances":        {change: func(o *Offering) { o.Count = 0 }, want: ErrOfferingInvalid, detail: "0 instances"},
		"expired before else": {change: func(o *Offering) { o.Fee.Minor = 0 }, now: base.ExpiresAt, want: ErrOfferingExpired, detail: "expired at"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := sampleOffering()
			tc.change(&o)
			o.Sign(secret)
			at := now
			if !tc.now.IsZero() {
				at = tc.now
			}
			_, err := VerifyOffering(secret, o.ID, KindBlock, at)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not say %q", err, tc.detail)
			}
		})
	}
}

func TestExtensionOfferingNeedsBlock(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	o := sampleOffering()
	o.Kind = KindExtension
	o.Sign(secret)
	if _, err := VerifyOffering(secret, o.ID, KindExtension, o.ExpiresAt.Add(-time.Minute)); !errors.Is(err, ErrOfferingInvalid) {
		t.Fatalf("extension quote without a block: got %v, want %v", err, ErrOfferingInvalid)
	}
	o.BlockID = "cb-1"
	o.Sign(secret)
	if _, err := VerifyOffering(secret, o.ID, KindExtension, o.ExpiresAt.Add(-time.Minute)); err != nil {
		t.Fatalf("extension quote of cb-1: %v", err)
	}
}

func TestPlanOfferingTermsRefused(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	base := samplePlanOffering()
	now := base.ExpiresAt.Add(-time.Minute)
	tests := map[string]struct {
		change func(*PlanOffering)
		now    time.Time
		want   error
		detail string
	}{
		"as quoted":              {change: func(*PlanOffering) {}},
		"first start past":       {change: func(o *PlanOffering) { o.ExpiresAt = o.End() }, now: base.Segments[0].Start.Add(time.Minute), want: ErrOfferingExpired, detail: "has passed"},
		"start off the hour":     {change: func(o *PlanOffering) { shift(o, 20*time.Minute) }, want: ErrOfferingInvalid, detail: "segment 1: "},
		"second segment free":    {change: func(o *PlanOffering) { o.Segments[1].Fee.Minor = 0 }, want: ErrOfferingInvalid, detail: "segment 2: "},
		"first segment negative": {change: func(o *PlanOffering) { o.Segments[0].Fee.Minor = -1 }, want: ErrOfferingInvalid, detail: "not positive"},
		"no instances":           {change: func(o *PlanOffering) { o.Count = 0 }, want: ErrOfferingInvalid, detail: "0 instances"},
		"expired and free":       {change: func(o *PlanOffering) { o.Segments[1].Fee.Minor = 0 }, now: base.ExpiresAt, want: ErrOfferingExpired, detail: "expired at"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := samplePlanOffering()
			tc.change(&o)
			o.Sign(secret)
			at := now
			if !tc.now.IsZero() {
				at = tc.now
			}
			_, err := VerifyPlanOffering(secret, o.ID, at)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not say %q", err, tc.detail)
			}
		})
	}
}

// shift moves every segment of o by d.
func shift(o *PlanOffering, d time.Duration) {
	for i := range o.Segments {
		o.Segments[i].Start = o.Segments[i].Start.Add(d)
		o.Segments[i].End = o.Segments[i].End.Add(d)
	}
}

func TestOfferingExpiry(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	block := sampleOffering()
	block.Sign(secret)
	ext := sampleOffering()
	ext.Kind, ext.BlockID, ext.ExpiresAt = KindExtension, "cb-1", ext.ExpiresAt.Add(time.Minute)
	ext.Sign(secret)
	plan := samplePlanOffering()
	plan.ExpiresAt = plan.ExpiresAt.Add(2 * time.Minute)
	plan.Sign(secret)
	for _, tc := range []struct {
		id   string
		want time.Time
	}{{block.ID, block.ExpiresAt}, {ext.ID, ext.ExpiresAt}, {plan.ID, plan.ExpiresAt}} {
		got, err := OfferingExpiry(tc.id)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("OfferingExpiry(%.12s…) = %s, %v; want %s", tc.id, got, err, tc.want)
		}
	}
	for _, id := range []string{"", "cbo-", "cbo-AAAA", "xyz-" + block.ID[4:], "tpo-" + block.ID[4:], block.ID[:20]} {
		if got, err := OfferingExpiry(id); !errors.Is(err, ErrOfferingInvalid) {
			t.Errorf("OfferingExpiry(%q) = %s, %v; want %v", id, got, err, ErrOfferingInvalid)
		}
	}
}

func TestCheckPrintable(t *testing.T) {
	tests := map[string]struct {
		in     string
		detail string // "" when accepted
	}{
		"empty":                {in: ""},
		"ascii":                {in: "load test (prod) #2"},
		"accents and cjk":      {in: "entraînement 训练"},
		"emoji with joiner":    {in: "team 👩\u200d💻"},
		"persian non-joiner":   {in: "می\u200cخواهم"},
		"nul":                  {in: "a\x00b", detail: "U+0000 at position 2"},
		"newline":              {in: "a\nb", detail: "U+000A at position 2"},
		"escape sequence":      {in: "\x1b[31mred", detail: "U+001B at position 1"},
		"delete":               {in: "a\x7f", detail: "U+007F"},
		"c1 control":           {in: "a\u0085", detail: "U+0085"},
		"right-to-left":        {in: "invoice\u202egpj.exe", detail: "U+202E at position 8"},
		"isolate":              {in: "\u2066x", detail: "U+2066"},
		"zero-width space":     {in: "a\u200bb", detail: "U+200B"},
		"byte order mark":      {in: "\ufeffname", detail: "U+FEFF"},
		"tag character":        {in: "a\U000E0041", detail: "U+E0041"},
		"line separator":       {in: "a\u2028b", detail: "U+2028"},
		"invalid utf-8":        {in: "ab\xffc", detail: "byte 0xff at position 3 is not valid UTF-8"},
		"truncated utf-8":      {in: "é\xe2\x82", detail: "byte 0xe2 at position 2"},
		"replacement accepted": {in: "a\ufffdb"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckPrintable("name", tc.in)
			if tc.detail == "" {
				if err != nil {
					t.Fatalf("CheckPrintable(%q) = %v, want nil", tc.in, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("CheckPrintable(%q) = %v, want %v", tc.in, err, ErrInvalidArgument)
			}
			if msg := err.Error(); !strings.Contains(msg, "name: ") || !strings.Contains(msg, tc.detail) {
				t.Errorf("CheckPrintable(%q) = %q, want the field and %q", tc.in, msg, tc.detail)
			}
		})
	}
}

// TestQuotesOfSameTermsDiffer: two signings of the same terms give two
// ids (each buys once), both valid; an id signed before quotes carried a
// nonce still verifies.
func TestQuotesOfSameTermsDiffer(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, b := sampleOffering(), sampleOffering()
	a.Sign(secret)
	b.Sign(secret)
	p, q := samplePlanOffering(), samplePlanOffering()
	p.Sign(secret)
	q.Sign(secret)
	if a.ID == b.ID || p.ID == q.ID || a.Nonce == 0 || p.Nonce == 0 {
		t.Fatalf("same terms signed twice: %s and %s, %s and %s", a.ID, b.ID, p.ID, q.ID)
	}
	now := a.ExpiresAt.Add(-time.Minute)
	for _, id := range []string{a.ID, b.ID} {
		if _, err := VerifyOffering(secret, id, KindBlock, now); err != nil {
			t.Errorf("VerifyOffering(%s): %v", id, err)
		}
	}
	for _, id := range []string{p.ID, q.ID} {
		if _, err := VerifyPlanOffering(secret, id, now); err != nil {
			t.Errorf("VerifyPlanOffering(%s): %v", id, err)
		}
	}
	// An id of the terms alone, as signed before nonces.
	old := sampleOffering()
	payload := old.appendTerms(nil)
	payload = payload[:len(payload)-nonceSize]
	old.ID = KindBlock + "-" + base64.RawURLEncoding.EncodeToString(append(payload, mac(secret, KindBlock, payload)...))
	got, err := VerifyOffering(secret, old.ID, KindBlock, now)
	if err != nil || got.Nonce != 0 || !got.Start.Equal(old.Start) {
		t.Fatalf("an id without a nonce: %+v, %v", got, err)
	}
}
