// Package seal encrypts the secrets that the server must be able to read
// back (the secrets of access keys, which verifying a SigV4 signature
// needs) with AES-256-GCM, under a key kept in a file outside the
// database: a copy of the database alone yields no secret.
//
// Each sealed secret names the key that sealed it by the key's id, a
// digest of the key, so that a server given another key file says so
// rather than failing obscurely.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"capblock/internal/core"
)

// keyLen is the length of an AES-256 key.
const keyLen = 32

// ErrWrongKey is returned by Open for a secret sealed under another key.
var ErrWrongKey = errors.New("sealed under another key")

// ErrTampered is returned by Open for a secret that does not decrypt under
// the key that claims to have sealed it: changed, or moved to another row.
var ErrTampered = errors.New("does not decrypt")

// Key seals and opens secrets. It is safe for concurrent use.
type Key struct {
	id   string
	raw  []byte // for the key file only
	aead cipher.AEAD
}

// New returns the key of 32 raw bytes.
func New(raw []byte) (*Key, error) {
	if len(raw) != keyLen {
		return nil, fmt.Errorf("a secrets key is %d bytes, not %d", keyLen, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("making the AES cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("making the GCM mode: %w", err)
	}
	sum := sha256.Sum256(append([]byte("capblock secrets key id\x00"), raw...))
	return &Key{id: "sk-" + hex.EncodeToString(sum[:8]), raw: append([]byte(nil), raw...), aead: aead}, nil
}

// Generate returns a new random key.
func Generate() *Key {
	raw := make([]byte, keyLen)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails on supported platforms
	k, err := New(raw)
	if err != nil {
		panic(err) // 32 bytes always make a key
	}
	return k
}

// ID names the key without revealing it.
func (k *Key) ID() string { return k.id }

// Seal encrypts plaintext bound to ad (associated data: what the secret
// belongs to, such as an access key id), so that a sealed secret copied to
// another row does not open there.
func (k *Key) Seal(plaintext, ad []byte) core.SealedSecret {
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails on supported platforms
	return core.SealedSecret{KeyID: k.id, Nonce: nonce, Ciphertext: k.aead.Seal(nil, nonce, plaintext, ad)}
}

// Open decrypts a sealed secret bound to ad. A secret sealed under another
// key is ErrWrongKey; one that does not decrypt, ErrTampered.
func (k *Key) Open(s core.SealedSecret, ad []byte) ([]byte, error) {
	if s.KeyID != k.id {
		return nil, fmt.Errorf("%w: sealed under key %s, this server holds key %s", ErrWrongKey, s.KeyID, k.id)
	}
	if len(s.Nonce) != k.aead.NonceSize() {
		return nil, fmt.Errorf("%w: a nonce of %d bytes, want %d", ErrTampered, len(s.Nonce), k.aead.NonceSize())
	}
	plain, err := k.aead.Open(nil, s.Nonce, s.Ciphertext, ad)
	if err != nil {
		return nil, fmt.Errorf("%w under key %s", ErrTampered, k.id)
	}
	return plain, nil
}
