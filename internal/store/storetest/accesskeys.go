package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
	"capblock/internal/store"
)

// accessKeysTests check the access keys of store.Accounts.
var accessKeysTests = []struct {
	name string
	run  func(*testing.T, Harness)
}{
	{"AccessKeys", testAccessKeys},
	{"RevokeAccessKey", testRevokeAccessKey},
	{"AccessKeysReopen", testAccessKeysReopen},
}

// makeAccessKey is a key of user (of team t1, see accessKeyFixture) whose
// sealed secret holds every byte value a column could mangle: zeros, high
// bytes, invalid UTF-8.
func makeAccessKey(id, accessKeyID, user string, created time.Time) core.AccessKey {
	return core.AccessKey{ID: id, AccessKeyID: accessKeyID, User: user, Team: "t1", CreatedAt: created,
		Secret: core.SealedSecret{
			KeyID:      "sk-0011223344556677",
			Nonce:      []byte{0, 1, 2, 0xff, 0xfe, 0, 6, 7, 8, 9, 10, 11},
			Ciphertext: []byte("\x00\xc3\x28 sealed " + id + "\xff\x00"),
		}}
}

// accessKeyFixture stores team t1 with users u1 and u2, and team t2 with
// user u3.
func accessKeyFixture(t *testing.T, h Harness) store.Full {
	s := tokenFixture(t, h)
	mustDo(t, "CreateTeam", s.CreateTeam(t.Context(), makeTeam("t2", "two")))
	mustDo(t, "CreateUser", s.CreateUser(t.Context(), makeUser("u3", "cat", "t2", core.RoleMember)))
	return s
}

// wantAccessKeys fails the test unless AccessKeys(user) returns want.
func wantAccessKeys(t *testing.T, s store.Full, user string, want []core.AccessKey) {
	t.Helper()
	got, err := s.AccessKeys(t.Context(), user)
	mustDo(t, "AccessKeys("+user+")", err)
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("AccessKeys(%q) (-want +got):\n%s", user, diff)
	}
}

// wantAccessKey fails the test unless AccessKey(want.ID) and
// AccessKeyByKeyID(want.AccessKeyID) return want.
func wantAccessKey(t *testing.T, s store.Full, want core.AccessKey) {
	t.Helper()
	got, err := s.AccessKey(t.Context(), want.ID)
	mustDo(t, "AccessKey("+want.ID+")", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AccessKey(%s) (-want +got):\n%s", want.ID, diff)
	}
	got, err = s.AccessKeyByKeyID(t.Context(), want.AccessKeyID)
	mustDo(t, "AccessKeyByKeyID("+want.AccessKeyID+")", err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AccessKeyByKeyID(%s) (-want +got):\n%s", want.AccessKeyID, diff)
	}
}

func testAccessKeys(t *testing.T, h Harness) {
	s := accessKeyFixture(t, h)
	wantAccessKeys(t, s, "", nil)
	_, err := s.AccessKey(t.Context(), "ak-1")
	wantErr(t, "AccessKey of an empty store", err, store.ErrNotFound)
	_, err = s.AccessKeyByKeyID(t.Context(), "AKIA0000000000000001")
	wantErr(t, "AccessKeyByKeyID of an empty store", err, store.ErrNotFound)

	// The team is the user's; a zero RevokedAt reads back as zero.
	k1 := makeAccessKey("ak-1", "AKIA0000000000000001", "u1", hour(2))
	k2 := makeAccessKey("ak-2", "AKIA0000000000000002", "u2", hour(0))
	k3 := makeAccessKey("ak-3", "AKIA0000000000000003", "u1", hour(1))
	k3.RevokedAt = hour(3)
	k4 := makeAccessKey("ak-4", "AKIA0000000000000004", "u3", hour(1))
	k4.Team = "t2"
	for _, k := range []core.AccessKey{k1, k2, k3, k4} {
		stored := k
		stored.Team = "" // not stored: read from the user
		mustDo(t, "CreateAccessKey("+k.ID+")", s.CreateAccessKey(t.Context(), stored))
	}
	wantAccessKeys(t, s, "", []core.AccessKey{k2, k3, k4, k1})
	wantAccessKeys(t, s, "u1", []core.AccessKey{k3, k1})
	wantAccessKeys(t, s, "u9", nil)
	for _, k := range []core.AccessKey{k1, k2, k3, k4} {
		wantAccessKey(t, s, k)
	}
	_, err = s.AccessKey(t.Context(), "ak-9")
	wantErr(t, "AccessKey of an unknown id", err, store.ErrNotFound)
	_, err = s.AccessKeyByKeyID(t.Context(), "AKIA0000000000000009")
	wantErr(t, "AccessKeyByKeyID of an unknown access key id", err, store.ErrNotFound)
	// Access key ids are compared exactly.
	_, err = s.AccessKeyByKeyID(t.Context(), "akia0000000000000001")
	wantErr(t, "AccessKeyByKeyID in lower case", err, store.ErrNotFound)

	err = s.CreateAccessKey(t.Context(), makeAccessKey("ak-1", "AKIA0000000000000005", "u2", hour(4)))
	wantErr(t, "CreateAccessKey with a duplicate id", err, store.ErrConflict)
	err = s.CreateAccessKey(t.Context(), makeAccessKey("ak-5", "AKIA0000000000000002", "u2", hour(4)))
	wantErr(t, "CreateAccessKey with a duplicate access key id", err, store.ErrConflict)
	err = s.CreateAccessKey(t.Context(), makeAccessKey("ak-6", "AKIA0000000000000006", "u9", hour(4)))
	wantErr(t, "CreateAccessKey of an unknown user", err, store.ErrNotFound)
	wantAccessKeys(t, s, "", []core.AccessKey{k2, k3, k4, k1})
	_, err = s.AccessKeyByKeyID(t.Context(), "AKIA0000000000000005")
	wantErr(t, "AccessKeyByKeyID of a refused key", err, store.ErrNotFound)
}

func testRevokeAccessKey(t *testing.T, h Harness) {
	s := accessKeyFixture(t, h)
	k1 := makeAccessKey("ak-1", "AKIA0000000000000001", "u1", hour(0))
	k2 := makeAccessKey("ak-2", "AKIA0000000000000002", "u1", hour(1))
	mustDo(t, "CreateAccessKey", s.CreateAccessKey(t.Context(), k1))
	mustDo(t, "CreateAccessKey", s.CreateAccessKey(t.Context(), k2))

	mustDo(t, "RevokeAccessKey", s.RevokeAccessKey(t.Context(), "ak-1", hour(5)))
	k1.RevokedAt = hour(5)
	wantAccessKey(t, s, k1)
	wantAccessKey(t, s, k2) // untouched
	// Revoking again keeps the first time.
	mustDo(t, "RevokeAccessKey again", s.RevokeAccessKey(t.Context(), "ak-1", hour(9)))
	wantAccessKey(t, s, k1)
	if got, err := s.AccessKeyByKeyID(t.Context(), k1.AccessKeyID); err != nil || got.Usable() {
		t.Errorf("AccessKeyByKeyID of a revoked key = %+v, %v; want it not usable", got, err)
	}
	err := s.RevokeAccessKey(t.Context(), "ak-9", hour(5))
	wantErr(t, "RevokeAccessKey of an unknown id", err, store.ErrNotFound)
	// Access keys and tokens are apart: a token's id names no key.
	mustDo(t, "CreateToken", s.CreateToken(t.Context(), makeToken("tk-1", "u1", "sha256:1", hour(0))))
	err = s.RevokeAccessKey(t.Context(), "tk-1", hour(5))
	wantErr(t, "RevokeAccessKey of a token's id", err, store.ErrNotFound)
	wantAccessKeys(t, s, "u1", []core.AccessKey{k1, k2})
}

func testAccessKeysReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("no Reopen in the harness")
	}
	s := accessKeyFixture(t, h)
	k1 := makeAccessKey("ak-1", "AKIA0000000000000001", "u1", hour(0))
	k2 := makeAccessKey("ak-2", "AKIA0000000000000002", "u1", hour(1))
	mustDo(t, "CreateAccessKey", s.CreateAccessKey(t.Context(), k1))
	mustDo(t, "CreateAccessKey", s.CreateAccessKey(t.Context(), k2))
	mustDo(t, "RevokeAccessKey", s.RevokeAccessKey(t.Context(), "ak-2", hour(2)))
	k2.RevokedAt = hour(2)

	s = h.Reopen(t, s)
	wantAccessKey(t, s, k1)
	wantAccessKey(t, s, k2)
	wantAccessKeys(t, s, "", []core.AccessKey{k1, k2})
}
