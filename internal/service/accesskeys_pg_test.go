package service

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/seal"
	"capblock/internal/store/pgtest"
	"capblock/internal/store/postgres"
)

// TestAccessKeyRevokedOnEveryReplica: a key that one replica has cached
// is refused there within a second of its revocation through another,
// well before the cache would let it go (accountTTL): the revocation
// reaches it through the watch, as a token's does.
func TestAccessKeyRevokedOnEveryReplica(t *testing.T) {
	dsn := pgtest.Start(t).NewDatabase(t)
	key := seal.Generate() // the key file the replicas share
	now := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	replica := func() *Service {
		st, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(t.Context(), Config{Fleet: healthFleet(), Store: st, Clock: clock.NewSim(now), Log: slog.New(slog.DiscardHandler), SecretsKey: key})
		if err != nil {
			t.Fatal(err)
		}
		_, stop := runService(t, svc)
		t.Cleanup(func() { stop(); st.Close() })
		waitFor(t, 20*time.Second, "the replica's watch to listen", func() bool { return watchListened(t, svc) })
		return svc
	}
	a, b := replica(), replica()
	st := a.store
	if err := st.CreateTeam(t.Context(), core.Team{ID: "team-a", Name: "a", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	ada := core.User{ID: "usr-ada", Name: "ada", Team: "team-a", Role: core.RoleMember, CreatedAt: now}
	if err := st.CreateUser(t.Context(), ada); err != nil {
		t.Fatal(err)
	}
	p := core.Principal{User: ada, TokenID: "tok-ada"}
	k, secret, err := a.CreateAccessKey(t.Context(), p, ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	// b opens the secret sealed by a, and caches the key.
	if got, who, err := b.AuthenticateAccessKey(t.Context(), k.AccessKeyID); err != nil || got != secret || who.User.ID != ada.ID {
		t.Fatalf("b authenticating a's key = %q, %+v, %v", got, who, err)
	}
	if _, err := a.RevokeAccessKey(t.Context(), p, k.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, time.Second, "the revocation to hold on b", func() bool {
		_, _, err := b.AuthenticateAccessKey(t.Context(), k.AccessKeyID)
		return errors.Is(err, core.ErrUnauthenticated)
	})
	t.Logf("refused on b %s after the revocation on a", time.Since(start).Round(time.Millisecond))
}
