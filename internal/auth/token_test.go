package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestNewTokenRoundTrip(t *testing.T) {
	tok, hash := New()
	if !strings.HasPrefix(tok, Prefix) || len(tok) != len(Prefix)+secretLen {
		t.Fatalf("token %q has the wrong form", tok)
	}
	if strings.Contains(hash, tok) || hash == tok || hash != Hash(tok) {
		t.Fatalf("hash %q must be the SHA-256 of the token, not the token", hash)
	}
	got, err := FromHeader("Bearer " + tok)
	if err != nil || got != tok {
		t.Fatalf("FromHeader: %q, %v", got, err)
	}
	if other, _ := New(); other == tok {
		t.Fatal("two tokens are equal")
	}
}

func TestFromHeaderRefuses(t *testing.T) {
	tok, _ := New()
	tests := map[string]string{
		"empty":              "",
		"no scheme":          tok,
		"basic":              "Basic " + tok,
		"no token":           "Bearer ",
		"two spaces":         "Bearer  " + tok,
		"trailing space":     "Bearer " + tok + " ",
		"short":              "Bearer " + tok[:len(tok)-1],
		"long":               "Bearer " + tok + "A",
		"wrong prefix":       "Bearer cbx_" + tok[4:],
		"not base64url":      "Bearer " + tok[:len(tok)-1] + "+",
		"non-canonical tail": "Bearer " + tok[:len(tok)-1] + "B", // B leaves padding bits set
	}
	for name, h := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := FromHeader(h); !errors.Is(err, ErrMalformed) {
				t.Fatalf("FromHeader(%q) = %v, want ErrMalformed", h, err)
			}
		})
	}
}

// FuzzFromHeader: no input panics; whatever is accepted has the token
// form and is exactly the part after the scheme.
func FuzzFromHeader(f *testing.F) {
	tok, _ := New()
	for _, s := range []string{"", "Bearer " + tok, "bearer " + tok, "Bearer cbt_", "Basic abc", "Bearer " + tok + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := FromHeader(h)
		if err != nil {
			return
		}
		if Check(got) != nil || !strings.HasSuffix(h, " "+got) || len(got) != len(Prefix)+secretLen {
			t.Fatalf("accepted %q from %q", got, h)
		}
	})
}
