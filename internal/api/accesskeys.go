package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/core"
)

// registerAccessKeys declares the access keys of the AWS protocols, under
// "Teams and access": made, listed and revoked by the rules of tokens.
func (s *server) registerAccessKeys(api huma.API) {
	create := s.operation("createAccessKey", http.MethodPost, "/v1/users/{id}/access-keys", "teams",
		"Create an AWS-style access key; its secret is shown this once")
	create.Description = "An access key signs requests to the AWS protocols at /aws (SigV4), as an AWS access key does: " +
		"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and the endpoint to this server's /aws. " +
		"It acts as its user, with the user's role and team. An admin may make one for any user, anyone else for themself only. " +
		"A user holds at most 10 live access keys; one more is refused with 409 conflict until one is revoked."
	create.DefaultStatus = http.StatusCreated
	huma.Register(api, create, s.createAccessKey)
	huma.Register(api, s.operation("listAccessKeys", http.MethodGet, "/v1/access-keys", "teams",
		"List access keys, without their secrets: all for an admin, one's own otherwise"), s.listAccessKeys)
	huma.Register(api, s.operation("revokeAccessKey", http.MethodDelete, "/v1/access-keys/{id}", "teams",
		"Revoke an access key, at once"), s.revokeAccessKey)
}

type accessKeyJSON struct {
	ID          string     `json:"id" example:"ak-0a1b2c3d4e5f6a7b8"`
	AccessKeyID string     `json:"accessKeyId" example:"AKIAZ3EXAMPLE7QW2ABC" doc:"What AWS clients send (AWS_ACCESS_KEY_ID)."`
	User        string     `json:"user"`
	Team        string     `json:"team"`
	CreatedAt   time.Time  `json:"createdAt"`
	RevokedAt   *time.Time `json:"revokedAt,omitempty"`
}

func toAccessKey(k core.AccessKey) accessKeyJSON {
	return accessKeyJSON{ID: k.ID, AccessKeyID: k.AccessKeyID, User: k.User, Team: k.Team, CreatedAt: k.CreatedAt.UTC(), RevokedAt: optionalTime(k.RevokedAt)}
}

type createAccessKeyInput struct {
	ID string `path:"id" doc:"User id."`
}

type newAccessKeyJSON struct {
	accessKeyJSON
	SecretAccessKey string `json:"secretAccessKey" doc:"The secret (AWS_SECRET_ACCESS_KEY), shown this once."`
}

func (s *server) createAccessKey(ctx context.Context, in *createAccessKeyInput) (*out[newAccessKeyJSON], error) {
	k, secret, err := s.svc.CreateAccessKey(ctx, in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(newAccessKeyJSON{accessKeyJSON: toAccessKey(k), SecretAccessKey: secret})
}

type accessKeysJSON struct {
	AccessKeys []accessKeyJSON `json:"accessKeys"`
}

func (s *server) listAccessKeys(ctx context.Context, _ *struct{}) (*out[accessKeysJSON], error) {
	ks, err := s.svc.AccessKeys(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	resp := accessKeysJSON{AccessKeys: make([]accessKeyJSON, 0, len(ks))}
	for _, k := range ks {
		resp.AccessKeys = append(resp.AccessKeys, toAccessKey(k))
	}
	return reply(resp)
}

type accessKeyIDInput struct {
	ID string `path:"id" doc:"Access key: its id (ak-…) or its access key id (AKIA…)."`
}

func (s *server) revokeAccessKey(ctx context.Context, in *accessKeyIDInput) (*out[accessKeyJSON], error) {
	k, err := s.svc.RevokeAccessKey(ctx, in.ID)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toAccessKey(k))
}
