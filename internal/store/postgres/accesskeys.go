package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The access keys live in the table of 0012_access_keys, written and read
// like the tokens (accounts.go). A key is read joined with its user, whose
// team is the key's. A revocation tells every watch, as a token's does,
// so that no replica keeps answering from what it cached of the key.

// CreateAccessKey stores an access key; a duplicate id or access key id
// is a conflict, an unknown user not found.
func (s *Store) CreateAccessKey(ctx context.Context, k core.AccessKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO access_keys (id, access_key_id, user_id, created_at, revoked_at,
			secret_key_id, secret_nonce, secret_ciphertext)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		k.ID, k.AccessKeyID, k.User, seconds(k.CreatedAt), optionalTime(k.RevokedAt),
		k.Secret.KeyID, k.Secret.Nonce, k.Secret.Ciphertext)
	return createError("creating access key "+k.ID, fmt.Sprintf("its id or access key id %s is taken", k.AccessKeyID),
		fmt.Sprintf("user %s does not exist", k.User), err)
}

const accessKeySelect = `SELECT k.id, k.access_key_id, k.user_id, u.team, k.created_at, k.revoked_at,
		k.secret_key_id, k.secret_nonce, k.secret_ciphertext
	FROM access_keys k JOIN users u ON u.id = k.user_id`

// AccessKey returns one access key by id, or an error wrapping
// store.ErrNotFound.
func (s *Store) AccessKey(ctx context.Context, id string) (core.AccessKey, error) {
	k, err := scanAccessKey(s.pool.QueryRow(ctx, accessKeySelect+` WHERE k.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.AccessKey{}, fmt.Errorf("access key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return core.AccessKey{}, fmt.Errorf("reading access key %s: %w", id, err)
	}
	return k, nil
}

// AccessKeyByKeyID returns the access key AWS clients name accessKeyID,
// or an error wrapping store.ErrNotFound.
func (s *Store) AccessKeyByKeyID(ctx context.Context, accessKeyID string) (core.AccessKey, error) {
	k, err := scanAccessKey(s.pool.QueryRow(ctx, accessKeySelect+` WHERE k.access_key_id = $1`, accessKeyID))
	if errors.Is(err, pgx.ErrNoRows) {
		return core.AccessKey{}, fmt.Errorf("access key %s: %w", accessKeyID, store.ErrNotFound)
	}
	if err != nil {
		return core.AccessKey{}, fmt.Errorf("reading access key %s: %w", accessKeyID, err)
	}
	return k, nil
}

// AccessKeys lists the access keys of a user ("" for all), ordered by
// creation time then id.
func (s *Store) AccessKeys(ctx context.Context, user string) ([]core.AccessKey, error) {
	var (
		keys []core.AccessKey
		err  error
	)
	if user == "" {
		keys, err = queryRows(ctx, s.pool, scanAccessKey, accessKeySelect+` ORDER BY k.created_at, k.id`)
	} else {
		keys, err = queryRows(ctx, s.pool, scanAccessKey, accessKeySelect+` WHERE k.user_id = $1 ORDER BY k.created_at, k.id`, user)
	}
	if err != nil {
		return nil, fmt.Errorf("listing access keys of user %q: %w", user, err)
	}
	return keys, nil
}

// RevokeAccessKey marks an access key revoked at at, telling every watch;
// a key already revoked keeps its first time.
func (s *Store) RevokeAccessKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.execAccounts(ctx, `UPDATE access_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`,
		seconds(at), id)
	if err != nil {
		return dbError("revoking access key "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoking access key %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func scanAccessKey(r rowScanner) (core.AccessKey, error) {
	var (
		k       core.AccessKey
		revoked *time.Time
	)
	if err := r.Scan(&k.ID, &k.AccessKeyID, &k.User, &k.Team, &k.CreatedAt, &revoked,
		&k.Secret.KeyID, &k.Secret.Nonce, &k.Secret.Ciphertext); err != nil {
		return core.AccessKey{}, err
	}
	k.CreatedAt, k.RevokedAt = k.CreatedAt.UTC(), fromOptional(revoked)
	return k, nil
}
