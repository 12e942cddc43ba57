package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"capblock/internal/core"
)

// SigningSecret is the server's signing secret (it signs offerings, so
// that their ids need no server state) as it is stored: Sealed under the
// server's secrets key, or Clear, as versions before sealing stored it and
// as a server without a secrets key (tests) still does. The service makes,
// seals and opens it (service/signingsecret.go); the drivers store what
// EncodeSigningSecret writes.
type SigningSecret struct {
	Clear  []byte
	Sealed core.SealedSecret
}

// clearSecretLen is the length of a clear signing secret. The sealed
// form is always longer, so that the two never read as each other.
const clearSecretLen = 32

// EncodeSigningSecret is the stored form of the signing secret, the same
// in every driver: the clear secret's 32 bytes, or the sealed form of a
// webhook's secret ("sealed:", the key id, the nonce and the ciphertext).
func EncodeSigningSecret(s SigningSecret) []byte {
	if s.Sealed.KeyID == "" {
		return bytes.Clone(s.Clear)
	}
	return []byte(encodeSealed(s.Sealed))
}

// DecodeSigningSecret reads what EncodeSigningSecret stored.
func DecodeSigningSecret(stored []byte) (SigningSecret, error) {
	text, sealed := strings.CutPrefix(string(stored), sealedPrefix)
	if !sealed || len(stored) == clearSecretLen {
		if len(stored) != clearSecretLen {
			return SigningSecret{}, fmt.Errorf("decoding the signing secret: %d bytes, want %d or a sealed secret", len(stored), clearSecretLen)
		}
		return SigningSecret{Clear: bytes.Clone(stored)}, nil
	}
	s, err := decodeSealed(text)
	if err != nil {
		return SigningSecret{}, fmt.Errorf("decoding the sealed signing secret: %w", err)
	}
	return SigningSecret{Sealed: s}, nil
}

// encodeSealed is the text form of a sealed secret: "sealed:" and the id
// of the key that sealed it, the nonce and the ciphertext (both base64),
// separated by colons.
func encodeSealed(s core.SealedSecret) string {
	return sealedPrefix + s.KeyID + ":" + base64.RawStdEncoding.EncodeToString(s.Nonce) +
		":" + base64.RawStdEncoding.EncodeToString(s.Ciphertext)
}

// decodeSealed reads the text of encodeSealed after its prefix.
func decodeSealed(text string) (core.SealedSecret, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 || parts[0] == "" {
		return core.SealedSecret{}, errors.New("want key id, nonce and ciphertext")
	}
	nonce, err := base64.RawStdEncoding.DecodeString(parts[1])
	if err != nil {
		return core.SealedSecret{}, fmt.Errorf("its nonce: %w", err)
	}
	ciphertext, err := base64.RawStdEncoding.DecodeString(parts[2])
	if err != nil {
		return core.SealedSecret{}, fmt.Errorf("its ciphertext: %w", err)
	}
	return core.SealedSecret{KeyID: parts[0], Nonce: nonce, Ciphertext: ciphertext}, nil
}

// SealedKeyIDs counts the secrets that st holds sealed, by the id of the
// secrets key that sealed them: the signing secret, the live access keys'
// and the webhooks'. A server must not start on a new secrets key while
// the database holds any: a new key opens none of them.
func SealedKeyIDs(ctx context.Context, st Full) (map[string]int, error) {
	ids := map[string]int{}
	secret, ok, err := st.Secret(ctx)
	if err != nil {
		return nil, err
	}
	if ok && secret.Sealed.KeyID != "" {
		ids[secret.Sealed.KeyID]++
	}
	keys, err := st.AccessKeys(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("listing access keys: %w", err)
	}
	for _, k := range keys {
		if k.Usable() && k.Secret.KeyID != "" {
			ids[k.Secret.KeyID]++
		}
	}
	hooks, err := st.ListWebhooks(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("listing webhooks: %w", err)
	}
	for _, w := range hooks {
		if w.Sealed.KeyID != "" {
			ids[w.Sealed.KeyID]++
		}
	}
	return ids, nil
}
