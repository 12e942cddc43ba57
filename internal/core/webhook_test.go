package core

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWebhookMatches(t *testing.T) {
	types := []string{"block.active", "block.expiration-warning", "plan.committed", "job.exited", "blocks.other", "block"}
	tests := map[string]struct {
		events []string
		want   []string
	}{
		"every type":             {events: []string{"*"}, want: types},
		"prefix":                 {events: []string{"block.*"}, want: []string{"block.active", "block.expiration-warning"}},
		"exact":                  {events: []string{"block.active"}, want: []string{"block.active"}},
		"several patterns":       {events: []string{"plan.*", "job.exited"}, want: []string{"plan.committed", "job.exited"}},
		"no patterns":            {events: nil, want: nil},
		"a prefix is not a type": {events: []string{"block"}, want: []string{"block"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := Webhook{Events: tc.events}
			var got []string
			for _, typ := range types {
				if w.Matches(typ) {
					got = append(got, typ)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("matched types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckEventPattern(t *testing.T) {
	tests := map[string]bool{
		"*":                        true,
		"block.*":                  true,
		"block.active":             true,
		"block.expiration-warning": true,
		"job.*":                    true,
		"":                         false,
		"block*":                   false,
		"*.active":                 false,
		"block.*.x":                false,
		"Block.Active":             false,
		"block..active":            false,
		"block. active":            false,
	}
	for pattern, valid := range tests {
		err := CheckEventPattern(pattern)
		if valid && err != nil {
			t.Errorf("CheckEventPattern(%q): %v, want nil", pattern, err)
		}
		if !valid && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckEventPattern(%q): %v, want an invalid argument", pattern, err)
		}
	}
}

func TestSignPayload(t *testing.T) {
	// The expected value comes from another implementation:
	//   printf '%s' '1764547200.{"id":"evt-1"}' | openssl dgst -sha256 -hmac whsec_test
	at := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	got := SignPayload([]byte("whsec_test"), at.Add(900*time.Millisecond), []byte(`{"id":"evt-1"}`))
	want := "t=1764547200,v1=ba251560c2f4f8a6a9a8b1d631c9e418bd1e377641ed7c329bad12f994db7080"
	if got != want {
		t.Errorf("SignPayload = %s, want %s", got, want)
	}
}

func TestVerifySignature(t *testing.T) {
	secret, body := []byte("whsec_test"), []byte(`{"id":"evt-1"}`)
	at := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	header := SignPayload(secret, at, body)
	tests := map[string]struct {
		secret    []byte
		header    string
		body      string
		now       time.Time
		tolerance time.Duration
		ok        bool
	}{
		"valid":                {secret: secret, header: header, body: string(body), now: at.Add(time.Minute), tolerance: 5 * time.Minute, ok: true},
		"no time check":        {secret: secret, header: header, body: string(body), now: at.Add(24 * time.Hour), ok: true},
		"another v1 also":      {secret: secret, header: "t=1764547200,v1=00," + header[len("t=1764547200,"):], body: string(body), now: at, ok: true},
		"another body":         {secret: secret, header: header, body: `{"id":"evt-2"}`, now: at},
		"another secret":       {secret: []byte("whsec_other"), header: header, body: string(body), now: at},
		"too old":              {secret: secret, header: header, body: string(body), now: at.Add(6 * time.Minute), tolerance: 5 * time.Minute},
		"another time":         {secret: secret, header: "t=1764547201" + header[len("t=1764547200"):], body: string(body), now: at},
		"no time":              {secret: secret, header: header[len("t=1764547200,"):], body: string(body), now: at},
		"not a header at all":  {secret: secret, header: "sha256=abc", body: string(body), now: at},
		"empty":                {secret: secret, header: "", body: string(body), now: at},
		"hex that is not hex":  {secret: secret, header: "t=1764547200,v1=zz", body: string(body), now: at},
		"signed in the future": {secret: secret, header: header, body: string(body), now: at.Add(-time.Hour), tolerance: 5 * time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := VerifySignature(tc.secret, tc.header, []byte(tc.body), tc.now, tc.tolerance)
			if tc.ok && err != nil {
				t.Fatalf("VerifySignature: %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("VerifySignature: %v, want ErrBadSignature", err)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 9; n++ {
		got = append(got, RetryDelay(n, time.Second, time.Minute))
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
}
