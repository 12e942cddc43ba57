package client

import (
	"context"
	"net/http"
	"net/url"
)

// CreateAccessKey makes an AWS-style access key for a user: POST
// /v1/users/{id}/access-keys. The answer holds the secret, which the
// server never shows again.
func (c *Client) CreateAccessKey(ctx context.Context, userID string) (NewAccessKey, error) {
	var out NewAccessKey
	path := "/v1/users/" + url.PathEscape(userID) + "/access-keys"
	if err := c.do(ctx, request{method: http.MethodPost, path: path}, &out); err != nil {
		return NewAccessKey{}, wrapf(err, "creating an access key for user %s", userID)
	}
	return out, nil
}

// AccessKeys lists every access key for an admin, one's own otherwise,
// without their secrets: GET /v1/access-keys.
func (c *Client) AccessKeys(ctx context.Context) ([]AccessKey, error) {
	var out struct {
		AccessKeys []AccessKey `json:"accessKeys"`
	}
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/access-keys"}, &out); err != nil {
		return nil, wrapf(err, "listing access keys")
	}
	return out.AccessKeys, nil
}

// RevokeAccessKey revokes an access key, named by its id or its access
// key id, at once: DELETE /v1/access-keys/{id}.
func (c *Client) RevokeAccessKey(ctx context.Context, id string) (AccessKey, error) {
	var k AccessKey
	if err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/access-keys/" + url.PathEscape(id)}, &k); err != nil {
		return AccessKey{}, wrapf(err, "revoking access key %s", id)
	}
	return k, nil
}
