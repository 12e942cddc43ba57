package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"capblock/internal/seal"
	"capblock/internal/store"
)

// The signing secret signs offerings, whose ids verify themselves with no
// server state; whoever holds it can sign a quote at any price. It is
// kept in the database sealed under the server's secrets key (like the
// secrets of access keys and webhooks), bound to its use, so that a copy
// of the database alone signs nothing. Replicas share it, and so share
// the key file.
//
// A secret stored in clear (by a version before sealing, or by a server
// without a secrets key) is sealed at the next start of a server with a
// key. A server without a key stores a new secret in clear: serve always
// has one (it makes the key file at the first start); only tests go
// without.

// signingSecretAD binds the sealed signing secret to its use, so that it
// opens nowhere else.
var signingSecretAD = []byte("capblock offering signing secret")

// signingSecretLen is the length of a new signing secret.
const signingSecretLen = 32

// SigningSecret returns the secret that signs offerings, stored in st and
// opened under key. A database that has none yet gets a new random one,
// sealed under key; one stored in clear is sealed under key. A secret
// sealed under another key than key, or while this server holds none, is
// an error naming the key that sealed it, wrapping seal.ErrWrongKey: the
// server must be given that key's file, and a new key would open none of
// the database's secrets.
func SigningSecret(ctx context.Context, st store.Store, key *seal.Key, log *slog.Logger) ([]byte, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stored, err := initSigningSecret(ctx, st, key)
	if err != nil {
		return nil, err
	}
	// Another replica may seal a clear secret meanwhile: read it again
	// once, then sealed.
	for range 2 {
		if stored.Sealed.KeyID != "" {
			return openSigningSecret(stored, key)
		}
		if key == nil {
			return stored.Clear, nil
		}
		err := st.SealSecret(ctx, stored.Clear, key.Seal(stored.Clear, signingSecretAD))
		switch {
		case err == nil:
			log.Info("sealed the offering signing secret, stored in clear, under the secrets key", "key", key.ID())
			return stored.Clear, nil
		case !errors.Is(err, store.ErrConflict):
			return nil, err
		}
		var ok bool
		if stored, ok, err = st.Secret(ctx); err != nil {
			return nil, err
		} else if !ok {
			return nil, errors.New("the signing secret is gone from the database")
		}
	}
	return nil, errors.New("the signing secret changed twice while this server sealed it")
}

// initSigningSecret returns the stored signing secret, storing a new one
// (sealed under key, when there is one) on a database that has none.
func initSigningSecret(ctx context.Context, st store.Store, key *seal.Key) (store.SigningSecret, error) {
	stored, ok, err := st.Secret(ctx)
	if err != nil || ok {
		return stored, err
	}
	fresh := make([]byte, signingSecretLen)
	_, _ = rand.Read(fresh) // crypto/rand.Read never fails on supported platforms
	secret := store.SigningSecret{Clear: fresh}
	if key != nil {
		secret = store.SigningSecret{Sealed: key.Seal(fresh, signingSecretAD)}
	}
	return st.InitSecret(ctx, secret)
}

// openSigningSecret opens the sealed signing secret under key.
func openSigningSecret(stored store.SigningSecret, key *seal.Key) ([]byte, error) {
	under := stored.Sealed.KeyID
	if key == nil {
		return nil, fmt.Errorf("the database's secrets are sealed under secrets key %s, and this server holds no secrets key (%w): give it that key's file (serve --secrets-key-file)",
			under, seal.ErrWrongKey)
	}
	if under != key.ID() {
		return nil, fmt.Errorf("the database's secrets are sealed under secrets key %s, and this server's secrets key is %s (%w): give it the key file that holds %s (serve --secrets-key-file; every replica shares one file), not a new one, which opens none of them",
			under, key.ID(), seal.ErrWrongKey, under)
	}
	secret, err := key.Open(stored.Sealed, signingSecretAD)
	if err != nil {
		return nil, fmt.Errorf("opening the signing secret sealed under secrets key %s: %w", under, err)
	}
	return secret, nil
}
