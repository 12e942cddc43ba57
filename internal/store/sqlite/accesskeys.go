package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"capblock/internal/core"
	"capblock/internal/store"
)

// The access keys live in the table of 0012_access_keys, written and read
// like the tokens (accounts.go). A key is read joined with its user, whose
// team is the key's.

// CreateAccessKey stores an access key; a duplicate id or access key id
// is a conflict, an unknown user not found.
func (s *Store) CreateAccessKey(ctx context.Context, k core.AccessKey) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO access_keys (id, access_key_id, user, created_at, revoked_at,
			secret_key_id, secret_nonce, secret_ciphertext)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.AccessKeyID, k.User, unixSeconds(k.CreatedAt), optionalTime(k.RevokedAt),
		k.Secret.KeyID, k.Secret.Nonce, k.Secret.Ciphertext)
	switch {
	case isForeignKey(err):
		return fmt.Errorf("creating access key %s: user %s does not exist: %w", k.ID, k.User, store.ErrNotFound)
	case isConstraint(err):
		return fmt.Errorf("creating access key %s: its id or access key id %s is taken: %w", k.ID, k.AccessKeyID, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("creating access key %s: %w", k.ID, err)
	}
	return nil
}

const accessKeySelect = `SELECT k.id, k.access_key_id, k.user, u.team, k.created_at, k.revoked_at,
		k.secret_key_id, k.secret_nonce, k.secret_ciphertext
	FROM access_keys k JOIN users u ON u.id = k.user`

// AccessKey returns one access key by id, or an error wrapping
// store.ErrNotFound.
func (s *Store) AccessKey(ctx context.Context, id string) (core.AccessKey, error) {
	k, err := scanAccessKey(s.r.QueryRowContext(ctx, accessKeySelect+` WHERE k.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
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
	k, err := scanAccessKey(s.r.QueryRowContext(ctx, accessKeySelect+` WHERE k.access_key_id = ?`, accessKeyID))
	if errors.Is(err, sql.ErrNoRows) {
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
		keys, err = queryRows(ctx, s.r, scanAccessKey, accessKeySelect+` ORDER BY k.created_at, k.id`)
	} else {
		keys, err = queryRows(ctx, s.r, scanAccessKey, accessKeySelect+` WHERE k.user = ? ORDER BY k.created_at, k.id`, user)
	}
	if err != nil {
		return nil, fmt.Errorf("listing access keys of user %q: %w", user, err)
	}
	return keys, nil
}

// RevokeAccessKey marks an access key revoked at at; a key already
// revoked keeps its first time.
func (s *Store) RevokeAccessKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE access_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`,
		unixSeconds(at), id)
	if err != nil {
		return fmt.Errorf("revoking access key %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("revoking access key %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("revoking access key %s: %w", id, store.ErrNotFound)
	}
	return nil
}

func scanAccessKey(r rowScanner) (core.AccessKey, error) {
	var (
		k       core.AccessKey
		created int64
		revoked sql.NullInt64
	)
	if err := r.Scan(&k.ID, &k.AccessKeyID, &k.User, &k.Team, &created, &revoked,
		&k.Secret.KeyID, &k.Secret.Nonce, &k.Secret.Ciphertext); err != nil {
		return core.AccessKey{}, err
	}
	k.CreatedAt, k.RevokedAt = fromUnix(created), fromOptional(revoked)
	return k, nil
}
