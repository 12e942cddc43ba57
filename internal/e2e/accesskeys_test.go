package e2e

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"capblock/internal/core"
)

type accessKey struct {
	ID              string `json:"id"`
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	User            string `json:"user"`
	Team            string `json:"team"`
	CreatedAt       string `json:"createdAt"`
	RevokedAt       string `json:"revokedAt"`
}

var (
	awsAccessKeyID = regexp.MustCompile(`^AKIA[A-Z0-9]{16}$`)
	awsSecret      = regexp.MustCompile(`^[A-Za-z0-9+/]{40}$`)
)

// TestAccessKeys: a member or a viewer makes access keys of its own, not
// of a teammate; the secret is shown once, never listed and never stored
// in clear; another team's key is not found; a revoked key no longer
// authenticates; each change is in the audit log.
func TestAccessKeys(t *testing.T) {
	e := start(t)
	f := newAuthzFixture(e)
	member, viewer := f.self[core.RoleMember], f.self[core.RoleViewer]

	// 1. One's own, as a member and as a viewer (the rules of tokens).
	var mine, viewers accessKey
	if code := call(t, e.url, "POST", "/v1/users/"+member+"/access-keys", nil, &mine, f.token(core.RoleMember)); code != 201 {
		t.Fatalf("a member making its own access key: %d", code)
	}
	if !awsAccessKeyID.MatchString(mine.AccessKeyID) || !awsSecret.MatchString(mine.SecretAccessKey) ||
		mine.User != member || mine.Team != f.alpha || mine.CreatedAt == "" || mine.RevokedAt != "" {
		t.Fatalf("the new key %+v: want an AKIA id, a secret of 40 base64 characters, the user and its team", mine)
	}
	if code := call(t, e.url, "POST", "/v1/users/"+viewer+"/access-keys", map[string]any{}, &viewers, f.token(core.RoleViewer)); code != 201 {
		t.Fatalf("a viewer making its own access key: %d", code)
	}
	secret, _, err := e.svc.AuthenticateAccessKey(t.Context(), mine.AccessKeyID)
	if err != nil || secret != mine.SecretAccessKey {
		t.Fatalf("AuthenticateAccessKey of the new key: %v (secret matches: %v)", err, secret == mine.SecretAccessKey)
	}

	// 2. Not of a teammate, nor of another team's user: not found, and
	// nothing stored.
	for _, u := range []string{viewer, f.users[f.alpha], f.users[f.beta]} {
		var p problem
		if code := call(t, e.url, "POST", "/v1/users/"+u+"/access-keys", nil, &p, f.token(core.RoleMember)); code != 404 || p.Code != "not_found" {
			t.Errorf("a member making a key of user %s: %d %s, want 404 not_found", u, code, p.Code)
		}
	}

	// 3. Listed without secrets: one's own, or all for an admin.
	list := func(token string) ([]accessKey, string) {
		var raw json.RawMessage
		if code := call(t, e.url, "GET", "/v1/access-keys", nil, &raw, token); code != 200 {
			t.Fatalf("listing access keys: %d", code)
		}
		var out struct {
			AccessKeys []accessKey `json:"accessKeys"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out.AccessKeys, string(raw)
	}
	got, raw := list(f.token(core.RoleMember))
	if len(got) != 1 || got[0].ID != mine.ID || got[0].AccessKeyID != mine.AccessKeyID {
		t.Fatalf("the member's access keys: %+v, want its one", got)
	}
	all, rawAll := list(f.token(core.RoleAdmin))
	if len(all) != 2 {
		t.Fatalf("the admin's list: %+v, want both keys", all)
	}
	for _, text := range []string{raw, rawAll} {
		if strings.Contains(text, "secretAccessKey") || strings.Contains(text, mine.SecretAccessKey) || strings.Contains(text, viewers.SecretAccessKey) {
			t.Fatalf("a list shows a secret: %s", text)
		}
	}

	// 4. Stored sealed: no column holds the secret.
	var keyID string
	var nonce, sealed []byte
	if err := openRead(t, e.db).QueryRow(`SELECT secret_key_id, secret_nonce, secret_ciphertext FROM access_keys WHERE id = ?`, mine.ID).
		Scan(&keyID, &nonce, &sealed); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{keyID, string(nonce), string(sealed)} {
		if strings.Contains(v, mine.SecretAccessKey) || strings.Contains(v, mine.SecretAccessKey[:16]) {
			t.Fatalf("the database holds the secret of %s in clear: %q", mine.ID, v)
		}
	}

	// 5. Another team's key is not found to a member, and stays live.
	var theirs accessKey
	if code := call(t, e.url, "POST", "/v1/users/"+f.users[f.beta]+"/access-keys", nil, &theirs); code != 201 {
		t.Fatalf("the admin making a key of team beta: %d", code)
	}
	for _, id := range []string{theirs.ID, theirs.AccessKeyID, viewers.ID} {
		var p problem
		if code := call(t, e.url, "DELETE", "/v1/access-keys/"+id, nil, &p, f.token(core.RoleMember)); code != 404 || p.Code != "not_found" {
			t.Errorf("a member revoking key %s of another: %d %s, want 404 not_found", id, code, p.Code)
		}
	}
	if _, _, err := e.svc.AuthenticateAccessKey(t.Context(), theirs.AccessKeyID); err != nil {
		t.Fatalf("team beta's key after refused revocations: %v", err)
	}

	// 6. Revoked by its owner: refused at once.
	var revoked accessKey
	if code := call(t, e.url, "DELETE", "/v1/access-keys/"+mine.ID, nil, &revoked, f.token(core.RoleMember)); code != 200 || revoked.RevokedAt == "" {
		t.Fatalf("revoking one's own key: %d %+v", code, revoked)
	}
	if _, _, err := e.svc.AuthenticateAccessKey(t.Context(), mine.AccessKeyID); !errors.Is(err, core.ErrUnauthenticated) {
		t.Fatalf("AuthenticateAccessKey of a revoked key: %v, want unauthenticated", err)
	}

	// 7. The audit log holds the creations and the revocation.
	var log struct {
		Records []struct{ User, Route, Method, Subject, Outcome string } `json:"records"`
	}
	if code := call(t, e.url, "GET", "/v1/audit", nil, &log); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	var created, revokedRecords int
	for _, r := range log.Records {
		switch {
		case r.Method == "POST" && r.Route == "/v1/users/{id}/access-keys" && r.User == member && r.Subject == member && r.Outcome == "ok":
			created++
		case r.Method == "DELETE" && r.Route == "/v1/access-keys/{id}" && r.User == member && r.Subject == mine.ID && r.Outcome == "ok":
			revokedRecords++
		}
	}
	if created != 1 || revokedRecords != 1 {
		t.Fatalf("audit: %d records of the member's key made and %d of it revoked, want 1 and 1:\n%+v", created, revokedRecords, log.Records)
	}
}
