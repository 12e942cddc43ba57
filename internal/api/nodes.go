package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
	"capblock/internal/core"
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

type failNodeInput struct {
	Name string `path:"name" doc:"Node name."`
	Body *struct {
		Reason string `json:"reason,omitempty" maxLength:"500" example:"GPU 3: XID 79" doc:"Why the node is failed, for operators to read."`
	}
}

// nodeHealthJSON is a node's stored health record: absent for a node
// never recorded, which is healthy.
type nodeHealthJSON struct {
	HealthReason string     `json:"healthReason,omitempty" doc:"Why the node is unhealthy, when it was said."`
	HealthSince  *time.Time `json:"healthSince,omitempty" doc:"When the node entered its health; absent when its health was never recorded."`
	HealthSource string     `json:"healthSource,omitempty" enum:"engine,admin" doc:"Who recorded the health: the backend (engine) or an administrator (admin); absent when never recorded."`
}

func toNodeHealth(r core.NodeHealth) nodeHealthJSON {
	if r.Since.IsZero() {
		return nodeHealthJSON{}
	}
	since := r.Since.UTC()
	return nodeHealthJSON{HealthReason: r.Reason, HealthSince: &since, HealthSource: string(r.Source)}
}

type nodeReportJSON struct {
	Node   string `json:"node"`
	Health string `json:"health" enum:"healthy,unhealthy"`
	nodeHealthJSON
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
	return nodeReportJSON{Node: r.Node, Health: string(r.Health), nodeHealthJSON: toNodeHealth(r.Record),
		Replaced: nonNil(r.Replaced), Degraded: nonNil(r.Degraded), Recovered: nonNil(r.Recovered)}
}

func (s *server) failNode(ctx context.Context, in *failNodeInput) (*out[nodeReportJSON], error) {
	var reason string
	if in.Body != nil {
		reason = in.Body.Reason
	}
	r, err := s.svc.FailNode(ctx, in.Name, reason)
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
