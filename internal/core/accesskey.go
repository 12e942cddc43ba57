package core

import "time"

// AccessKey is an AWS-style access key of a user, for the AWS protocols:
// AccessKeyID names it in requests signed with SigV4, and its secret signs
// them. Verifying a signature needs the secret itself, so the secret is
// stored sealed (encrypted with a key kept outside the database), never
// hashed like a token.
type AccessKey struct {
	// ID names the key in capblock's own API ("ak-…").
	ID string
	// AccessKeyID is what AWS clients send: "AKIA" and 16 upper-case
	// letters and digits.
	AccessKeyID string
	User        string
	// Team is the team of User, as the store reads it; it is not stored
	// with the key.
	Team      string
	CreatedAt time.Time
	RevokedAt time.Time // zero: not revoked
	Secret    SealedSecret
}

// Usable reports whether the key may authenticate.
func (k AccessKey) Usable() bool { return k.RevokedAt.IsZero() }

// SealedSecret is a secret encrypted at rest: the ciphertext with its
// authentication tag, the nonce it was sealed with, and the id of the key
// that sealed it, so that a server holding another key says so.
type SealedSecret struct {
	KeyID      string
	Nonce      []byte
	Ciphertext []byte
}
