package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/contract"
)

// registerOperations declares the probes. /metrics and /openapi.json are
// served by promhttp and huma themselves.
func (s *server) registerOperations(api huma.API) {
	huma.Register(api, s.operation("healthz", http.MethodGet, "/healthz", "operations",
		"Liveness: the process serves HTTP"), s.healthz)
	huma.Register(api, s.operation("readyz", http.MethodGet, "/readyz", "operations",
		"Readiness: the service can serve (its database is reachable)"), s.readyz)
}

type healthJSON struct {
	Status string `json:"status" example:"ok"`
}

func (s *server) healthz(context.Context, *struct{}) (*out[healthJSON], error) {
	return reply(healthJSON{Status: "ok"})
}

func (s *server) readyz(ctx context.Context, _ *struct{}) (*out[healthJSON], error) {
	if err := s.svc.Ready(ctx); err != nil {
		recordError(ctx, err)
		return nil, NewProblem(http.StatusServiceUnavailable, CodeInternal, "the service is not ready")
	}
	return reply(healthJSON{Status: "ok"})
}

// registerClock declares /v1/admin/clock, which exists only when the server
// runs on a simulated clock.
func (s *server) registerClock(api huma.API) {
	c := clockHandlers{svc: s.svc}
	huma.Register(api, s.operation("getClock", http.MethodGet, "/v1/admin/clock", "operations",
		"The simulated clock's time"), c.get)
	huma.Register(api, s.operation("setClock", http.MethodPost, "/v1/admin/clock", "operations",
		"Move the simulated clock: advance it by a duration or set it to a time"), c.set)
}

type clockHandlers struct {
	svc contract.Service
}

type clockJSON struct {
	Now time.Time `json:"now"`
}

type clockRequestJSON struct {
	Advance string `json:"advance,omitempty" example:"6h" doc:"Go duration to move the clock forward by."`
	Now     string `json:"now,omitempty" format:"date-time" doc:"Time to set the clock to (RFC 3339)."`
}

type clockInput struct {
	Body clockRequestJSON

	advance time.Duration
}

// Resolve checks that exactly one of advance and now is given.
func (in *clockInput) Resolve(huma.Context) []error {
	switch {
	case in.Body.Advance == "" && in.Body.Now == "":
		return []error{&huma.ErrorDetail{Location: "body", Message: "give advance or now"}}
	case in.Body.Advance != "" && in.Body.Now != "":
		return []error{&huma.ErrorDetail{Location: "body", Message: "give advance or now, not both"}}
	case in.Body.Advance != "":
		d, err := parseDuration("body.advance", in.Body.Advance, 0, 0)
		if err != nil {
			return []error{err}
		}
		in.advance = d
	}
	return nil
}

func (c clockHandlers) get(ctx context.Context, _ *struct{}) (*out[clockJSON], error) {
	now, err := c.svc.Clock(ctx)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(clockJSON{Now: now.UTC()})
}

func (c clockHandlers) set(ctx context.Context, in *clockInput) (*out[clockJSON], error) {
	req := contract.ClockRequest{Advance: in.advance}
	if in.Body.Now != "" {
		req.Set = parseTime(in.Body.Now)
	}
	now, err := c.svc.SetClock(ctx, req)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(clockJSON{Now: now.UTC()})
}
