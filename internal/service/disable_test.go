package service

import (
	"errors"
	"strings"
	"testing"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
	"capblock/internal/seal"
)

// TestDisableUsersAndTeams: a disabled user's token and access key stop
// authenticating and work again once enabled; a disabled team's users
// stop authenticating, nothing is bought for it even by an administrator,
// and it buys again once enabled; an administrator cannot disable
// themself or their own team; an unknown id is not found.
func TestDisableUsersAndTeams(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	ctx := t.Context()
	_, token, err := f.svc.CreateToken(ctx, core.Principal{User: f.admin.User}, f.b.User.ID, 0) // as at bootstrap: no token of its own
	if err != nil {
		t.Fatal(err)
	}
	key, secret, err := f.svc.CreateAccessKey(ctx, f.admin, f.b.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	authenticates := func() (tokenErr, keyErr error) {
		_, tokenErr = f.svc.Authenticate(ctx, token)
		_, _, keyErr = f.svc.AuthenticateAccessKey(ctx, key.AccessKeyID)
		return tokenErr, keyErr
	}
	// A disabled account's key is refused saying why, with its secret, so
	// that the AWS endpoint checks the signature before it tells why.
	keyRefusedSaying := func(why string) {
		t.Helper()
		got, _, err := f.svc.AuthenticateAccessKey(ctx, key.AccessKeyID)
		if !errors.Is(err, core.ErrUnauthenticated) || !strings.Contains(err.Error(), why) || got != secret {
			t.Errorf("AuthenticateAccessKey: %v (secret returned: %v); want unauthenticated saying %q, with the secret", err, got == secret, why)
		}
	}
	if tErr, kErr := authenticates(); tErr != nil || kErr != nil {
		t.Fatalf("before: token %v, key %v", tErr, kErr)
	}

	// The user.
	u, err := f.svc.SetUserDisabled(ctx, f.admin, f.b.User.ID, true)
	if err != nil || u.DisabledAt.IsZero() {
		t.Fatalf("disabling the user: %+v, %v", u, err)
	}
	if tErr, kErr := authenticates(); !errors.Is(tErr, core.ErrUnauthenticated) || !errors.Is(kErr, core.ErrUnauthenticated) {
		t.Fatalf("disabled user: token %v, key %v; want both unauthenticated", tErr, kErr)
	}
	keyRefusedSaying("user " + f.b.User.Name + " was disabled")
	if _, err := f.svc.SetUserDisabled(ctx, f.admin, f.b.User.ID, false); err != nil {
		t.Fatal(err)
	}
	if tErr, kErr := authenticates(); tErr != nil || kErr != nil {
		t.Fatalf("enabled again: token %v, key %v", tErr, kErr)
	}

	// The team.
	offer := func() string {
		t.Helper()
		offs, err := f.svc.Offerings(ctx, core.SearchRequest{Types: []string{"l4.1x"}, Count: 1, Duration: 2 * time.Hour,
			StartAfter: f.svc.clock.Now(), EndBefore: f.svc.clock.Now().Add(48 * time.Hour)})
		if err != nil || len(offs) == 0 {
			t.Fatalf("search: %d offerings, %v", len(offs), err)
		}
		return offs[0].ID
	}
	if _, err := f.svc.SetTeamDisabled(ctx, f.admin, "team-b", true); err != nil {
		t.Fatal(err)
	}
	if tErr, kErr := authenticates(); !errors.Is(tErr, core.ErrUnauthenticated) || !errors.Is(kErr, core.ErrUnauthenticated) {
		t.Fatalf("disabled team: token %v, key %v; want both unauthenticated", tErr, kErr)
	}
	keyRefusedSaying("team team-b was disabled")
	if _, _, err := f.svc.Purchase(ctx, contract.PurchaseRequest{Team: "team-b", OfferingID: offer(), ClientToken: "for-b"}); !errors.Is(err, core.ErrInvalidState) {
		t.Fatalf("an admin buying for a disabled team: %v; want invalid state", err)
	}
	if _, err := f.svc.SetTeamDisabled(ctx, f.admin, "team-b", false); err != nil {
		t.Fatal(err)
	}
	if tErr, kErr := authenticates(); tErr != nil || kErr != nil {
		t.Fatalf("team enabled again: token %v, key %v", tErr, kErr)
	}
	if _, _, err := f.svc.Purchase(ctx, contract.PurchaseRequest{Team: "team-b", OfferingID: offer(), ClientToken: "for-b-again"}); err != nil {
		t.Fatalf("buying for the enabled team: %v", err)
	}

	// Refusals.
	if _, err := f.svc.SetUserDisabled(ctx, f.admin, f.admin.User.ID, true); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("disabling oneself: %v", err)
	}
	if _, err := f.svc.SetTeamDisabled(ctx, f.admin, f.admin.User.Team, true); !errors.Is(err, core.ErrInvalidState) {
		t.Errorf("disabling one's own team: %v", err)
	}
	if _, err := f.svc.SetUserDisabled(ctx, f.admin, "usr-nobody", true); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("an unknown user: %v", err)
	}
	if _, err := f.svc.SetTeamDisabled(ctx, f.admin, "team-nobody", true); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("an unknown team: %v", err)
	}
}
