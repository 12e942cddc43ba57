package service

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/seal"
	"capblock/internal/store/sqlite"
)

// newSealingHookEnv is newHookEnv on the SQLite file path, with a secrets
// key.
func newSealingHookEnv(t *testing.T, path string, key *seal.Key) *hookEnv {
	t.Helper()
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, team := range []string{"t1", "t2"} {
		if err := st.CreateTeam(t.Context(), core.Team{ID: team, Name: team, CreatedAt: hookT0}); err != nil {
			t.Fatal(err)
		}
	}
	return &hookEnv{t: t, st: st, svc: newSealingService(t, st, key)}
}

func newSealingService(t *testing.T, st *sqlite.Store, key *seal.Key) *Service {
	t.Helper()
	svc, err := New(t.Context(), Config{Fleet: core.Fleet{Currency: "USD", Limits: core.DefaultLimits(), Pricing: core.DefaultPricing()},
		Store: st, Clock: clock.NewSim(hookT0), Log: slog.New(slog.DiscardHandler), AllowPrivateWebhooks: true, SecretsKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// storedBytes is what the SQLite database at path holds on disk: the file,
// its write-ahead log and its shared memory.
func storedBytes(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestWebhookSecretSealed: a webhook's signing secret is not in the
// database's files, and its deliveries verify with the secret its owner
// was given.
func TestWebhookSecretSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.db")
	e := newSealingHookEnv(t, path, seal.Generate())
	r := newReceiver(t, always(204))
	hook := e.hook("t1", r.URL, "*")
	r.secret = hook.Secret
	if hook.Secret == "" {
		t.Fatal("CreateWebhook returned no secret")
	}
	e.run(fastRetries)
	e.emit("t1", "block.active")
	e.waitLog(hook.ID, []string{"evt-1 0 0", "evt-1 1 204 done"})
	if _, errs := r.requests(); len(errs) > 0 {
		t.Errorf("bad signatures: %v", errs)
	}
	if bytes.Contains(storedBytes(t, path), []byte(hook.Secret)) {
		t.Error("the webhook's secret is in the database's files")
	}
	stored, err := e.st.Webhook(t.Context(), hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Secret != "" || stored.Sealed.KeyID != e.svc.secretsKey.ID() {
		t.Errorf("stored webhook: clear secret %t, sealed under %q; want no clear secret and key %s",
			stored.Secret != "", stored.Sealed.KeyID, e.svc.secretsKey.ID())
	}
}

// TestWebhookSecretsInClearSealedAtStart: a webhook stored with its secret
// in clear, by an older version, is sealed when a server with a secrets
// key starts, and its deliveries still verify with that secret. A server
// with another key says why it cannot sign.
func TestWebhookSecretsInClearSealedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks.db")
	key := seal.Generate()
	e := newSealingHookEnv(t, path, nil) // no key: as an older version
	r := newReceiver(t, always(204))
	legacy := e.hook("t1", r.URL, "*")
	r.secret = legacy.Secret
	if stored, err := e.st.Webhook(t.Context(), legacy.ID); err != nil || stored.Secret != legacy.Secret {
		t.Fatalf("stored without a key: %v; want the secret in clear", err)
	}

	e.svc = newSealingService(t, e.st, key)
	stored, err := e.st.Webhook(t.Context(), legacy.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(core.Webhook{Sealed: core.SealedSecret{KeyID: key.ID()}}, core.Webhook{Secret: stored.Secret, Sealed: core.SealedSecret{KeyID: stored.Sealed.KeyID}}); diff != "" {
		t.Fatalf("the clear secret after a start with a key (-want +got):\n%s", diff)
	}
	e.run(fastRetries)
	e.emit("t1", "block.active")
	e.waitLog(legacy.ID, []string{"evt-1 0 0", "evt-1 1 204 done"})
	if _, errs := r.requests(); len(errs) > 0 {
		t.Errorf("bad signatures: %v", errs)
	}

	other := &Service{secretsKey: seal.Generate()} // a server with another key does not start: see TestSigningSecretUnderAnotherKey
	if _, err := other.webhookSecret(stored); err == nil || !bytes.Contains([]byte(err.Error()), []byte("sealed under another key")) {
		t.Errorf("opening under another key: %v; want it said so", err)
	}
}
