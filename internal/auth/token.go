// Package auth makes and reads capblock's API tokens. A token is
// "cbt_" followed by 43 base64url characters (32 random bytes); the server
// stores only its SHA-256, so a stolen database yields no usable token.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
)

// Prefix starts every token, so a leaked one is easy to recognise.
const Prefix = "cbt_"

const secretLen = 43 // base64url of 32 bytes, unpadded

// ErrMalformed is returned for anything that is not a well-formed token.
var ErrMalformed = errors.New("malformed token")

// New returns a fresh token and the hash to store for it.
func New() (token, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	token = Prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, Hash(token)
}

// Hash is the stored form of a token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// FromHeader extracts the token of an "Authorization: Bearer <token>"
// header value, checking its form strictly.
func FromHeader(header string) (string, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMalformed
	}
	if err := Check(token); err != nil {
		return "", err
	}
	return token, nil
}

// Check reports whether s has the form of a token.
func Check(s string) error {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok || len(rest) != secretLen {
		return ErrMalformed
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(rest); err != nil {
		return ErrMalformed
	}
	return nil
}
