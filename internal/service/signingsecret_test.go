package service

import (
	"bytes"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/seal"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// openSecretsStore opens a SQLite store at path for the signing secret's
// tests.
func openSecretsStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// secretsFleet is a fleet of no nodes, enough to start a service.
func secretsFleet() core.Fleet {
	return core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()}
}

// wantNotInFiles fails when the database's files at path hold secret, as
// it is or in hex.
func wantNotInFiles(t *testing.T, path string, secret []byte) {
	t.Helper()
	raw := storedBytes(t, path)
	if bytes.Contains(raw, secret) || bytes.Contains(raw, []byte(hex.EncodeToString(secret))) {
		t.Errorf("the database's files hold the signing secret in clear")
	}
}

// TestSigningSecretSealed: the offering signing secret of a new database
// is stored sealed under the secrets key, is not in the database's files,
// and a restart with the same key signs with the same secret.
func TestSigningSecretSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capblock.db")
	st := openSecretsStore(t, path)
	key := seal.Generate()
	svc := newSealingService(t, st, key)
	if len(svc.secret) != signingSecretLen {
		t.Fatalf("the signing secret is %d bytes, want %d", len(svc.secret), signingSecretLen)
	}
	stored, ok, err := st.Secret(t.Context())
	if err != nil || !ok || stored.Clear != nil || stored.Sealed.KeyID != key.ID() {
		t.Fatalf("stored signing secret: clear %t, sealed under %q, %t, %v; want sealed under %s",
			stored.Clear != nil, stored.Sealed.KeyID, ok, err, key.ID())
	}
	wantNotInFiles(t, path, svc.secret)
	if again := newSealingService(t, st, key); !bytes.Equal(again.secret, svc.secret) {
		t.Error("a restart with the same key signs with another secret")
	}
}

// TestSigningSecretInClearSealedAtStart: a signing secret stored in clear
// (by a server without a secrets key, as an older version did) is in the
// database's files; the next start with a key seals it, keeps signing
// with it, and leaves it in none of the files.
func TestSigningSecretInClearSealedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "capblock.db")
	st := openSecretsStore(t, path)
	old := newSealingService(t, st, nil)
	if stored, ok, err := st.Secret(t.Context()); err != nil || !ok || !bytes.Equal(stored.Clear, old.secret) {
		t.Fatalf("stored without a key: %v, %t; want the secret in clear", err, ok)
	}
	if !bytes.Contains(storedBytes(t, path), old.secret) {
		t.Fatal("the clear signing secret is not found in the database's files: the search for it proves nothing")
	}

	key := seal.Generate()
	var logs bytes.Buffer
	svc, err := New(t.Context(), Config{Fleet: secretsFleet(), Store: st, Clock: clock.NewSim(hookT0), SecretsKey: key,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svc.secret, old.secret) {
		t.Error("sealing changed the signing secret: quotes already given would no longer verify")
	}
	if stored, _, err := st.Secret(t.Context()); err != nil || stored.Clear != nil || stored.Sealed.KeyID != key.ID() {
		t.Fatalf("stored after a start with a key: clear %t, sealed under %q, %v; want sealed under %s",
			stored.Clear != nil, stored.Sealed.KeyID, err, key.ID())
	}
	if !strings.Contains(logs.String(), "sealed the offering signing secret") {
		t.Errorf("the sealing was not logged:\n%s", logs.String())
	}
	wantNotInFiles(t, path, old.secret)
}

// TestSigningSecretSealedOnceByReplicas: replicas starting at once on a
// database whose signing secret is in clear seal it once, and all sign
// with it.
func TestSigningSecretSealedOnceByReplicas(t *testing.T) {
	st := openSecretsStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	clear, err := SigningSecret(t.Context(), st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := seal.Generate()
	const replicas = 6
	got := make([][]byte, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { got[i], errs[i] = SigningSecret(t.Context(), st, key, nil) })
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil || !bytes.Equal(got[i], clear) {
			t.Fatalf("replica %d: %v; want the secret stored in clear", i, errs[i])
		}
	}
	if stored, _, err := st.Secret(t.Context()); err != nil || stored.Sealed.KeyID != key.ID() {
		t.Fatalf("stored: sealed under %q, %v; want %s", stored.Sealed.KeyID, err, key.ID())
	}
}

// TestSigningSecretUnderAnotherKey: a server given another secrets key
// than the one that sealed the signing secret, or none, does not start:
// it says which key it needs, and changes nothing stored.
func TestSigningSecretUnderAnotherKey(t *testing.T) {
	st := openSecretsStore(t, filepath.Join(t.TempDir(), "capblock.db"))
	key := seal.Generate()
	newSealingService(t, st, key)
	before, _, err := st.Secret(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	other := seal.Generate()
	tests := map[string]struct {
		key  *seal.Key
		want []string
	}{
		"another key": {key: other, want: []string{key.ID(), other.ID(), "not a new one"}},
		"no key":      {key: nil, want: []string{key.ID(), "--secrets-key-file"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := New(t.Context(), Config{Fleet: secretsFleet(), Store: st, SecretsKey: tc.key})
			if !errors.Is(err, seal.ErrWrongKey) {
				t.Fatalf("New = %v; want seal.ErrWrongKey", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error %q does not say %q", err, w)
				}
			}
			after, _, err := st.Secret(t.Context())
			if err != nil || !bytes.Equal(store.EncodeSigningSecret(after), store.EncodeSigningSecret(before)) {
				t.Errorf("the stored signing secret changed: %v", err)
			}
		})
	}
}
