package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// registerDisable declares disabling and enabling users and teams (admin).
func (s *server) registerDisable(api huma.API) {
	huma.Register(api, s.operation("disableUser", http.MethodPost, "/v1/users/{id}/disable", "teams",
		"Disable a user: their tokens and access keys stop authenticating until enabled (admin)"), s.disableUser)
	huma.Register(api, s.operation("enableUser", http.MethodPost, "/v1/users/{id}/enable", "teams",
		"Enable a disabled user again (admin)"), s.enableUser)
	huma.Register(api, s.operation("disableTeam", http.MethodPost, "/v1/teams/{id}/disable", "teams",
		"Disable a team: its users stop authenticating and nothing is bought for it; what it bought runs on (admin)"), s.disableTeam)
	huma.Register(api, s.operation("enableTeam", http.MethodPost, "/v1/teams/{id}/enable", "teams",
		"Enable a disabled team again (admin)"), s.enableTeam)
}

type userIDInput struct {
	ID string `path:"id" doc:"User id."`
}

func (s *server) disableUser(ctx context.Context, in *userIDInput) (*out[userJSON], error) {
	return s.setUserDisabled(ctx, in.ID, true)
}

func (s *server) enableUser(ctx context.Context, in *userIDInput) (*out[userJSON], error) {
	return s.setUserDisabled(ctx, in.ID, false)
}

func (s *server) setUserDisabled(ctx context.Context, id string, disabled bool) (*out[userJSON], error) {
	u, err := s.svc.SetUserDisabled(ctx, id, disabled)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toUser(u))
}

func (s *server) disableTeam(ctx context.Context, in *teamIDInput) (*out[teamJSON], error) {
	return s.setTeamDisabled(ctx, in.ID, true)
}

func (s *server) enableTeam(ctx context.Context, in *teamIDInput) (*out[teamJSON], error) {
	return s.setTeamDisabled(ctx, in.ID, false)
}

func (s *server) setTeamDisabled(ctx context.Context, id string, disabled bool) (*out[teamJSON], error) {
	t, err := s.svc.SetTeamDisabled(ctx, id, disabled)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toTeam(t))
}
