package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
)

// registerNodes declares the admin's node-health calls.
func (s *server) registerNodes(api huma.API) {
	huma.Register(api, s.operation("failNode", http.MethodPost, "/v1/admin/nodes/{name}/fail", "operations",
		"Mark a node failed: its blocks get replacement GPUs, or are degraded when none is free (admin)"), s.failNode)
	huma.Register(api, s.operation("recoverNode", http.MethodPost, "/v1/admin/nodes/{name}/recover", "operations",
		"Mark a node healthy again (admin)"), s.recoverNode)
}

type nodeNameInput struct {
	Name string `path:"name" doc:"Node name."`
}

type nodeReportJSON struct {
	Node      string   `json:"node"`
	Health    string   `json:"health" enum:"healthy,unhealthy"`
	Replaced  []string `json:"replaced" doc:"Blocks moved to replacement GPUs."`
	Degraded  []string `json:"degraded" doc:"Blocks left short: no replacement was free."`
	Recovered []string `json:"recovered" doc:"Degraded blocks whole again."`
}

func toNodeReport(r contract.NodeReport) nodeReportJSON {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return nodeReportJSON{Node: r.Node, Health: string(r.Health), Replaced: nonNil(r.Replaced), Degraded: nonNil(r.Degraded), Recovered: nonNil(r.Recovered)}
}

func (s *server) failNode(ctx context.Context, in *nodeNameInput) (*out[nodeReportJSON], error) {
	r, err := s.svc.FailNode(ctx, in.Name)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toNodeReport(r))
}

func (s *server) recoverNode(ctx context.Context, in *nodeNameInput) (*out[nodeReportJSON], error) {
	r, err := s.svc.RecoverNode(ctx, in.Name)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toNodeReport(r))
}
