package service

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"

	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"capblock/internal/clock"
	"capblock/internal/core"
	"capblock/internal/fleet"
	"capblock/internal/seal"
	"capblock/internal/store"
	"capblock/internal/store/sqlite"
)

// keysFixture is a service on a SQLite file with the secrets key key, and
// its users: an admin, a member and a viewer of team-a, and a member of
// team-b.
type keysFixture struct {
	svc                      *Service
	db                       string
	st                       store.Full
	lookups                  *atomic.Int64 // reads of a key by access key id
	admin, member, viewer, b core.Principal
	logs                     *bytes.Buffer
}

func newKeysFixture(t *testing.T, key *seal.Key) *keysFixture {
	t.Helper()
	db := filepath.Join(t.TempDir(), "capblock.db")
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &keysFixture{db: db, st: st, lookups: new(atomic.Int64)}
	now := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	for _, team := range []string{"team-a", "team-b"} {
		if err := st.CreateTeam(t.Context(), core.Team{ID: team, Name: team, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []struct {
		p          *core.Principal
		name, team string
		role       core.Role
	}{
		{&f.admin, "admin", "team-a", core.RoleAdmin},
		{&f.member, "member", "team-a", core.RoleMember},
		{&f.viewer, "viewer", "team-a", core.RoleViewer},
		{&f.b, "member-b", "team-b", core.RoleMember},
	} {
		user := core.User{ID: "usr-" + u.name, Name: u.name, Team: u.team, Role: u.role, CreatedAt: now}
		if err := st.CreateUser(t.Context(), user); err != nil {
			t.Fatal(err)
		}
		*u.p = core.Principal{User: user, TokenID: "tok-" + u.name}
	}
	f.svc, f.logs = f.service(t, key)
	return f
}

// service starts another service (a replica, or a restart) on the
// fixture's store with key, and returns it with its log.
func (f *keysFixture) service(t *testing.T, key *seal.Key) (*Service, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	svc, err := New(t.Context(), Config{Fleet: fleet.Demo(), Store: countingKeys{f.st, f.lookups}, SecretsKey: key,
		Clock: clock.NewSim(time.Date(2030, 1, 7, 1, 0, 0, 0, time.UTC)), Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return svc, logs
}

// countingKeys counts the reads of access keys by access key id.
type countingKeys struct {
	store.Full
	n *atomic.Int64
}

func (c countingKeys) AccessKeyByKeyID(ctx context.Context, id string) (core.AccessKey, error) {
	c.n.Add(1)
	return c.Full.AccessKeyByKeyID(ctx, id)
}

var (
	accessKeyIDForm = regexp.MustCompile(`^AKIA[A-Z0-9]{16}$`)
	secretForm      = regexp.MustCompile(`^[A-Za-z0-9+/]{40}$`)
)

func TestCreateAccessKey(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	// 1. One's own, as any role; as an admin, anyone's.
	for name, tc := range map[string]struct {
		p    core.Principal
		user string
		want error
	}{
		"member, its own":           {p: f.member, user: f.member.User.ID},
		"viewer, its own":           {p: f.viewer, user: f.viewer.User.ID},
		"admin, another team's":     {p: f.admin, user: f.b.User.ID},
		"member, a teammate's":      {p: f.member, user: f.viewer.User.ID, want: core.ErrNotFound},
		"viewer, another team's":    {p: f.viewer, user: f.b.User.ID, want: core.ErrNotFound},
		"admin, an unknown user":    {p: f.admin, user: "usr-nobody", want: core.ErrNotFound},
		"member, an unknown user":   {p: f.member, user: "usr-nobody", want: core.ErrNotFound},
		"other team, a team-a user": {p: f.b, user: f.member.User.ID, want: core.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			k, secret, err := f.svc.CreateAccessKey(t.Context(), tc.p, tc.user)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || secret != "" {
					t.Fatalf("CreateAccessKey = %+v, %q, %v; want %v", k, secret, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !accessKeyIDForm.MatchString(k.AccessKeyID) || !secretForm.MatchString(secret) || !strings.HasPrefix(k.ID, "ak-") {
				t.Fatalf("key %+v with secret %q: want an ak- id, an AKIA access key id and a secret of 40 base64 characters", k, secret)
			}
			if k.User != tc.user || k.Team == "" || k.CreatedAt.IsZero() {
				t.Fatalf("key %+v: want user %s with its team and a creation time", k, tc.user)
			}
		})
	}
	// 2. Nothing was stored for the refused ones.
	all, err := f.svc.AccessKeys(t.Context(), f.admin)
	if err != nil || len(all) != 3 {
		t.Fatalf("AccessKeys as admin = %d keys, %v; want the 3 made", len(all), err)
	}
}

func TestAccessKeysListed(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	mine := mustAccessKey(t, f.svc, f.member, f.member.User.ID)
	theirs := mustAccessKey(t, f.svc, f.admin, f.b.User.ID)
	for name, tc := range map[string]struct {
		p    core.Principal
		want []string
	}{
		"admin: all":          {p: f.admin, want: []string{mine.ID, theirs.ID}},
		"member: its own":     {p: f.member, want: []string{mine.ID}},
		"viewer: none of its": {p: f.viewer},
		"other team: its own": {p: f.b, want: []string{theirs.ID}},
	} {
		t.Run(name, func(t *testing.T) {
			ks, err := f.svc.AccessKeys(t.Context(), tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range ks {
				got = append(got, k.ID)
			}
			// Made at one time on the simulated clock, they come by id.
			slices.Sort(got)
			slices.Sort(tc.want)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("AccessKeys = %v, want %v", got, tc.want)
			}
		})
	}
}

// mustAccessKey makes a key of user as p.
func mustAccessKey(t *testing.T, svc *Service, p core.Principal, user string) core.AccessKey {
	t.Helper()
	k, _, err := svc.CreateAccessKey(t.Context(), p, user)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAuthenticateAccessKey(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	k, secret, err := f.svc.CreateAccessKey(t.Context(), f.member, f.member.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 1. The secret and the user, read from the database once while
	// cached, as a token is.
	for range 3 {
		got, p, err := f.svc.AuthenticateAccessKey(t.Context(), k.AccessKeyID)
		if err != nil || got != secret || p.User != f.member.User || p.TokenID != k.ID {
			t.Fatalf("AuthenticateAccessKey = %q, %+v, %v; want the secret and user %s", got, p, err, f.member.User.ID)
		}
	}
	if n := f.lookups.Load(); n != 1 {
		t.Fatalf("3 authentications read the key %d times, want once", n)
	}
	// 2. Unknown and malformed ids, and a token's id.
	for _, id := range []string{"AKIA" + strings.Repeat("Z", 16), "akia" + k.AccessKeyID[4:], k.ID, "", "AKIA", k.AccessKeyID + "A"} {
		if _, _, err := f.svc.AuthenticateAccessKey(t.Context(), id); !errors.Is(err, core.ErrUnauthenticated) {
			t.Errorf("AuthenticateAccessKey(%q) = %v, want unauthenticated", id, err)
		}
	}
	// 3. A revoked key is refused at once, though it was cached.
	if _, err := f.svc.RevokeAccessKey(t.Context(), f.member, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.AuthenticateAccessKey(t.Context(), k.AccessKeyID); !errors.Is(err, core.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("AuthenticateAccessKey of a revoked key = %v, want unauthenticated, revoked", err)
	}
}

func TestRevokeAccessKey(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	mine := mustAccessKey(t, f.svc, f.member, f.member.User.ID)
	teammates := mustAccessKey(t, f.svc, f.viewer, f.viewer.User.ID)
	theirs := mustAccessKey(t, f.svc, f.b, f.b.User.ID)
	// 1. Another's key, of the team or not, is not found, and stays live.
	for _, tc := range []struct {
		p  core.Principal
		id string
	}{{f.member, teammates.ID}, {f.member, theirs.ID}, {f.member, theirs.AccessKeyID}, {f.b, mine.ID}, {f.member, "ak-unknown"}} {
		if _, err := f.svc.RevokeAccessKey(t.Context(), tc.p, tc.id); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("%s revoking %s: %v, want not found", tc.p.User.Name, tc.id, err)
		}
	}
	for _, k := range []core.AccessKey{teammates, theirs} {
		if _, _, err := f.svc.AuthenticateAccessKey(t.Context(), k.AccessKeyID); err != nil {
			t.Errorf("key %s after refused revocations: %v", k.ID, err)
		}
	}
	// 2. One's own by its access key id; an admin's of anyone.
	got, err := f.svc.RevokeAccessKey(t.Context(), f.member, mine.AccessKeyID)
	if err != nil || got.ID != mine.ID || got.RevokedAt.IsZero() {
		t.Fatalf("revoking one's own key = %+v, %v; want it revoked", got, err)
	}
	if got, err := f.svc.RevokeAccessKey(t.Context(), f.admin, theirs.ID); err != nil || got.RevokedAt.IsZero() {
		t.Fatalf("an admin revoking another team's key = %+v, %v", got, err)
	}
	if _, _, err := f.svc.AuthenticateAccessKey(t.Context(), theirs.AccessKeyID); !errors.Is(err, core.ErrUnauthenticated) {
		t.Fatalf("a key revoked by an admin: %v, want unauthenticated", err)
	}
}

func TestAccessKeyBound(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	var first core.AccessKey
	for i := range maxAccessKeysPerUser {
		k := mustAccessKey(t, f.svc, f.member, f.member.User.ID)
		if i == 0 {
			first = k
		}
	}
	if _, _, err := f.svc.CreateAccessKey(t.Context(), f.member, f.member.User.ID); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("key %d: %v, want a conflict", maxAccessKeysPerUser+1, err)
	}
	if _, err := f.svc.RevokeAccessKey(t.Context(), f.member, first.ID); err != nil {
		t.Fatal(err)
	}
	mustAccessKey(t, f.svc, f.member, f.member.User.ID) // room again
}

// TestAccessKeySealed: the database holds no secret in clear, a server
// with another secrets key refuses the key (and says so in its log), and a
// sealed secret moved to another key's row does not open there.
func TestAccessKeySealed(t *testing.T) {
	key := seal.Generate()
	f := newKeysFixture(t, key)
	k, secret, err := f.svc.CreateAccessKey(t.Context(), f.member, f.member.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	other, otherSecret, err := f.svc.CreateAccessKey(t.Context(), f.viewer, f.viewer.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 1. The raw row: no column holds the secret, in text or decoded.
	raw, err := sql.Open("sqlite", "file:"+f.db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT * FROM access_keys WHERE id = ?`, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatalf("no row for key %s", k.ID)
	}
	values := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range values {
		ptrs[i] = &values[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	decoded, _ := base64.StdEncoding.DecodeString(secret)
	for i, v := range values {
		text := []byte(fmt.Sprint(v))
		if b, ok := v.([]byte); ok {
			text = b
		}
		if bytes.Contains(text, []byte(secret)) || bytes.Contains(text, decoded) || bytes.Contains(text, []byte(secret[:20])) {
			t.Fatalf("column %s of access key %s holds its secret: %q", cols[i], k.ID, text)
		}
	}
	var keyID string
	if err := raw.QueryRow(`SELECT secret_key_id FROM access_keys WHERE id = ?`, k.ID).Scan(&keyID); err != nil || keyID != key.ID() {
		t.Fatalf("secret_key_id = %q, %v; want %s", keyID, err, key.ID())
	}

	// 2. A replica with another key file does not start: it cannot open
	// the signing secret, and says which key it needs. On a database
	// whose access keys were sealed under another key than its signing
	// secret (made anew here, as if sealed by a server with another key
	// file before signing secrets were sealed) it starts, refuses both
	// keys, and says why at start and when asked; the server with the
	// right key still opens them.
	wrongKey := seal.Generate()
	if _, err := New(t.Context(), Config{Fleet: fleet.Demo(), Store: f.st, SecretsKey: wrongKey}); !errors.Is(err, seal.ErrWrongKey) || !strings.Contains(err.Error(), key.ID()) {
		t.Fatalf("a replica with another key file started: %v; want seal.ErrWrongKey naming key %s", err, key.ID())
	}
	restore := replaceSigningSecret(t, f.db)
	wrong, logs := f.service(t, wrongKey)
	restore()
	if !strings.Contains(logs.String(), "sealed under another secrets key") {
		t.Errorf("the start of a server with another key logged nothing of it:\n%s", logs)
	}
	for _, id := range []string{k.AccessKeyID, other.AccessKeyID} {
		got, _, err := wrong.AuthenticateAccessKey(t.Context(), id)
		if !errors.Is(err, core.ErrUnauthenticated) || got != "" {
			t.Fatalf("AuthenticateAccessKey(%s) under another key = %q, %v; want unauthenticated", id, got, err)
		}
	}
	if !strings.Contains(logs.String(), "cannot open") || !strings.Contains(logs.String(), k.AccessKeyID) {
		t.Errorf("the refusal was not logged with the key:\n%s", logs)
	}
	if got, _, err := f.svc.AuthenticateAccessKey(t.Context(), other.AccessKeyID); err != nil || got != otherSecret {
		t.Fatalf("the right key: %q, %v", got, err)
	}

	// 3. The sealed secret of one key copied into another's row does not
	// open there: the access key id is bound to it.
	rw, err := sql.Open("sqlite", "file:"+f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.Exec(`UPDATE access_keys SET (secret_nonce, secret_ciphertext) =
		(SELECT secret_nonce, secret_ciphertext FROM access_keys WHERE id = ?) WHERE id = ?`, k.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	fresh, _ := f.service(t, key) // nothing cached
	if got, _, err := fresh.AuthenticateAccessKey(t.Context(), other.AccessKeyID); !errors.Is(err, core.ErrUnauthenticated) || got != "" {
		t.Fatalf("a secret moved to another row = %q, %v; want unauthenticated", got, err)
	}
}

// replaceSigningSecret takes the signing secret out of the SQLite database
// at db, so that the next server to start makes one anew, and returns what
// puts it back.
func replaceSigningSecret(t *testing.T, db string) (restore func()) {
	t.Helper()
	rw, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	var stored []byte
	if err := rw.QueryRow(`SELECT value FROM meta WHERE key = 'secret'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Exec(`DELETE FROM meta WHERE key = 'secret'`); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := rw.Exec(`UPDATE meta SET value = ? WHERE key = 'secret'`, stored); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAccessKeysNeedASecretsKey(t *testing.T) {
	f := newKeysFixture(t, nil)
	if _, _, err := f.svc.CreateAccessKey(t.Context(), f.member, f.member.User.ID); !errors.Is(err, core.ErrInvalidState) || !strings.Contains(err.Error(), "secrets key") {
		t.Fatalf("CreateAccessKey without a secrets key: %v, want invalid state naming the key", err)
	}
}

// A token made with an access key (which never expires) may last as
// long as asked.
func TestTokenOfAnAccessKey(t *testing.T) {
	f := newKeysFixture(t, seal.Generate())
	k, _, err := f.svc.CreateAccessKey(t.Context(), f.member, f.member.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := f.svc.AuthenticateAccessKey(t.Context(), k.AccessKeyID)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateToken(t.Context(), p, f.member.User.ID, time.Hour); err != nil {
		t.Fatalf("a token made with an access key: %v", err)
	}
}
