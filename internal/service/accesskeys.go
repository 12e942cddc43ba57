package service

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// Access keys are the credentials of the AWS protocols: an access key id
// and a secret that signs requests (SigV4). Who may make, list and revoke
// them follows the rules of tokens. Verifying a signature needs the
// secret itself, so it is stored sealed under the server's secrets key
// (Config.SecretsKey), bound to its access key id.

const (
	// accessKeyPrefix starts the id that capblock's own API names a key by.
	accessKeyPrefix = "ak"
	// awsKeyPrefix starts the access key ids of long-term AWS keys, which
	// AWS clients expect to see.
	awsKeyPrefix = "AKIA"
	// awsKeyIDLen is the length of an AWS access key id.
	awsKeyIDLen = 20
)

// maxAccessKeysPerUser bounds a user's live access keys, for the reasons
// of maxTokensPerUser.
const maxAccessKeysPerUser = 10

// newAccessKeyID returns an AWS-style access key id: AKIA, then 16
// upper-case letters and digits (base32 of 80 random bits).
func newAccessKeyID() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return awsKeyPrefix + base32.StdEncoding.EncodeToString(b[:])
}

// newSecretAccessKey returns an AWS-style secret: 40 base64 characters
// (240 random bits).
func newSecretAccessKey() string {
	var b [30]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.StdEncoding.EncodeToString(b[:])
}

// awsKeyIDShaped reports whether s has the form of the access key ids
// this server makes, so that anything else is refused without a read.
func awsKeyIDShaped(s string) bool {
	if len(s) != awsKeyIDLen || !strings.HasPrefix(s, awsKeyPrefix) {
		return false
	}
	for _, c := range s {
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// isAccessKey reports whether the credential id of a principal
// (Principal.TokenID) names an access key rather than a token.
func isAccessKey(credentialID string) bool {
	return strings.HasPrefix(credentialID, accessKeyPrefix+"-")
}

// CreateAccessKey makes an access key for a user: an admin for anyone,
// anyone else for themselves, as with tokens. The secret is returned this
// once. A user holds at most maxAccessKeysPerUser live keys.
func (s *Service) CreateAccessKey(ctx context.Context, p core.Principal, userID string) (core.AccessKey, string, error) {
	// 1. May p, and does the user exist?
	if p.User.Role != core.RoleAdmin && p.User.ID != userID {
		return core.AccessKey{}, "", fmt.Errorf("%w: user %s", core.ErrNotFound, userID)
	}
	if s.secretsKey == nil {
		return core.AccessKey{}, "", fmt.Errorf("%w: this server holds no secrets key to seal an access key's secret with (serve --secrets-key-file)", core.ErrInvalidState)
	}
	u, err := s.store.User(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return core.AccessKey{}, "", fmt.Errorf("%w: user %s", core.ErrNotFound, userID)
	} else if err != nil {
		return core.AccessKey{}, "", fmt.Errorf("loading user %s: %w", userID, err)
	}
	// 2. Is there room?
	if n, err := s.liveAccessKeys(ctx, userID, ""); err != nil {
		return core.AccessKey{}, "", err
	} else if n >= maxAccessKeysPerUser {
		return core.AccessKey{}, "", tooManyAccessKeys(userID)
	}
	// 3. Store it sealed, then count again, as CreateToken does.
	secret := newSecretAccessKey()
	k := core.AccessKey{ID: newID(accessKeyPrefix), AccessKeyID: newAccessKeyID(), User: userID, CreatedAt: s.clock.Now()}
	k.Secret = s.secretsKey.Seal([]byte(secret), []byte(k.AccessKeyID))
	if err := s.store.CreateAccessKey(ctx, k); err != nil {
		return core.AccessKey{}, "", fmt.Errorf("creating an access key for user %s: %w", userID, err)
	}
	if n, err := s.liveAccessKeys(ctx, userID, k.ID); err != nil || n >= maxAccessKeysPerUser {
		if rerr := s.store.RevokeAccessKey(context.WithoutCancel(ctx), k.ID, k.CreatedAt); rerr != nil {
			return core.AccessKey{}, "", fmt.Errorf("revoking access key %s, made beyond the bound of user %s: %w", k.ID, userID, rerr)
		}
		if err != nil {
			return core.AccessKey{}, "", err
		}
		return core.AccessKey{}, "", tooManyAccessKeys(userID)
	}
	k.Team = u.Team
	return k, secret, nil
}

// liveAccessKeys counts the user's access keys not revoked, but for the
// one named except.
func (s *Service) liveAccessKeys(ctx context.Context, userID, except string) (int, error) {
	ks, err := s.store.AccessKeys(ctx, userID)
	if err != nil {
		return 0, fmt.Errorf("listing the access keys of user %s: %w", userID, err)
	}
	n := 0
	for _, k := range ks {
		if k.ID != except && k.Usable() {
			n++
		}
	}
	return n, nil
}

func tooManyAccessKeys(userID string) error {
	return fmt.Errorf("%w: user %s holds %d live access keys, the most a user may; revoke one (DELETE /v1/access-keys/{id})",
		core.ErrConflict, userID, maxAccessKeysPerUser)
}

// AccessKeys lists access keys: every key for an admin, one's own
// otherwise. Their secrets stay sealed.
func (s *Service) AccessKeys(ctx context.Context, p core.Principal) ([]core.AccessKey, error) {
	user := p.User.ID
	if p.User.Role == core.RoleAdmin {
		user = ""
	}
	ks, err := s.store.AccessKeys(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("listing access keys: %w", err)
	}
	return ks, nil
}

// RevokeAccessKey revokes an access key, named by its id or its access
// key id, at once and on every replica: an admin any, anyone else their
// own.
func (s *Service) RevokeAccessKey(ctx context.Context, p core.Principal, id string) (core.AccessKey, error) {
	var (
		k   core.AccessKey
		err error
	)
	if awsKeyIDShaped(id) {
		k, err = s.store.AccessKeyByKeyID(ctx, id)
	} else {
		k, err = s.store.AccessKey(ctx, id)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.User.Role != core.RoleAdmin && k.User != p.User.ID) {
		return core.AccessKey{}, fmt.Errorf("%w: access key %s", core.ErrNotFound, id)
	}
	if err != nil {
		return core.AccessKey{}, fmt.Errorf("loading access key %s: %w", id, err)
	}
	err = s.store.RevokeAccessKey(ctx, k.ID, s.clock.Now())
	s.accounts.forget() // the other replicas hear of it from the store
	if err != nil {
		return core.AccessKey{}, fmt.Errorf("revoking access key %s: %w", k.ID, err)
	}
	return s.store.AccessKey(ctx, k.ID)
}

// AuthenticateAccessKey returns the secret of a live access key and who it
// acts as. Unknown and revoked keys, keys whose user is gone, and keys
// whose secret this server cannot open (sealed under another secrets key)
// are all ErrUnauthenticated, with a reason; the last is also logged, for
// the operator, once per cache period.
//
// A live key whose user or team is disabled is ErrUnauthenticated too,
// saying so, but returned with its secret and principal: a key id is no
// secret, so the verifier checks the signature before it tells why the
// key is refused.
//
// What it reads is cached as a token is (accountCache): a signed request
// reads the database no more often than a bearer token's, and a
// revocation on any replica empties every replica's cache.
func (s *Service) AuthenticateAccessKey(ctx context.Context, accessKeyID string) (string, core.Principal, error) {
	type credential struct {
		key    core.AccessKey
		user   core.User
		secret string
		// sealErr says why the secret did not open, when it did not.
		sealErr error
	}
	if !awsKeyIDShaped(accessKeyID) {
		return "", core.Principal{}, fmt.Errorf("%w: %q is not an access key id of this server (AKIA and 16 upper-case letters and digits)", core.ErrUnauthenticated, accessKeyID)
	}
	if s.secretsKey == nil {
		return "", core.Principal{}, fmt.Errorf("%w: this server holds no secrets key, so no access key", core.ErrUnauthenticated)
	}
	unknown := false // unknown keys are not cached: the read always runs
	c, err := cachedRead(&s.accounts, "akey:"+accessKeyID, false, func() (credential, error) {
		k, err := s.store.AccessKeyByKeyID(ctx, accessKeyID)
		if err != nil {
			unknown = errors.Is(err, store.ErrNotFound)
			return credential{}, fmt.Errorf("looking up access key %s: %w", accessKeyID, err)
		}
		u, err := s.store.User(ctx, k.User)
		if err != nil {
			unknown = errors.Is(err, store.ErrNotFound)
			return credential{}, fmt.Errorf("loading the user of access key %s: %w", accessKeyID, err)
		}
		c := credential{key: k, user: u}
		if !k.Usable() {
			return c, nil
		}
		secret, err := s.secretsKey.Open(k.Secret, []byte(k.AccessKeyID))
		if err != nil {
			c.sealErr = err
			s.log.Error("refusing an access key whose secret this server cannot open: give every replica the same --secrets-key-file, or revoke the key and make a new one",
				"accessKeyId", accessKeyID, "id", k.ID, "user", k.User, "err", err)
			return c, nil
		}
		c.secret = string(secret)
		return c, nil
	})
	if unknown {
		return "", core.Principal{}, fmt.Errorf("%w: access key %s is not known to this server", core.ErrUnauthenticated, accessKeyID)
	}
	if err != nil {
		return "", core.Principal{}, err
	}
	switch k := c.key; {
	case !k.Usable():
		return "", core.Principal{}, fmt.Errorf("%w: access key %s was revoked at %s", core.ErrUnauthenticated, accessKeyID, k.RevokedAt.Format(time.RFC3339))
	case c.sealErr != nil:
		return "", core.Principal{}, fmt.Errorf("%w: this server cannot read the secret of access key %s (see its log); make a new access key", core.ErrUnauthenticated, accessKeyID)
	}
	p := core.Principal{User: c.user, TokenID: c.key.ID}
	if err := s.checkEnabled(ctx, c.user); err != nil {
		if !errors.Is(err, core.ErrUnauthenticated) {
			return "", core.Principal{}, err
		}
		return c.secret, p, err
	}
	return c.secret, p, nil
}

// checkSealedKeys warns, at start, of the stored live access keys whose
// secrets were sealed under another key than this server's: they will be
// refused until the server is given the key that sealed them.
func (s *Service) checkSealedKeys(ctx context.Context) error {
	if s.secretsKey == nil {
		return nil
	}
	ks, err := s.store.AccessKeys(ctx, "")
	if err != nil {
		return fmt.Errorf("listing access keys: %w", err)
	}
	others := map[string]int{}
	for _, k := range ks {
		if k.Usable() && k.Secret.KeyID != s.secretsKey.ID() {
			others[k.Secret.KeyID]++
		}
	}
	for id, n := range others {
		s.log.Warn("live access keys were sealed under another secrets key than this server's; they will be refused: give this server the key file of the others, or make new keys",
			"keys", n, "sealedUnder", id, "serverKey", s.secretsKey.ID())
	}
	return nil
}
