package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// maxWait bounds a long poll of /v1/events.
const maxWait = 60 * time.Second

// registerEvents declares the event feed (webhooks are elsewhere).
func (s *server) registerEvents(api huma.API) {
	huma.Register(api, s.operation("listEvents", http.MethodGet, "/v1/events", "events",
		"Events after a cursor, waiting up to wait for at least one (long poll)"), s.events)
}

type eventsInput struct {
	After string `query:"after" doc:"Cursor from the previous answer's next; from the start when empty."`
	Wait  string `query:"wait" example:"30s" doc:"How long to wait for an event, as a Go duration; 0 (default) to 60s."`

	wait time.Duration
}

// Resolve parses wait.
func (in *eventsInput) Resolve(huma.Context) []error {
	if in.Wait == "" {
		return nil
	}
	d, err := parseDuration("query.wait", in.Wait, 0, maxWait)
	if err != nil {
		return []error{err}
	}
	in.wait = d
	return nil
}

func (s *server) events(ctx context.Context, in *eventsInput) (*out[eventsJSON], error) {
	events, next, err := s.svc.Events(ctx, scopeOf(ctx), in.After, in.wait)
	if err != nil {
		return nil, serviceProblem(ctx, err)
	}
	return reply(toEvents(events, next))
}
