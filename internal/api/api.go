// Package api is capblock's REST/JSON v1 HTTP layer (API.md), a front end
// over the use cases' contract (package contract). It maps requests onto
// contract.Service and service errors onto RFC 9457 problems with stable
// codes, and does nothing else: every decision, roles and scopes included,
// is the contract's or the service's. Operations are declared with huma, so the OpenAPI 3.1 document
// served at /openapi.json is generated from the same code that serves them.
package api

import (
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"capblock/internal/contract"
	"capblock/internal/httpx"
)

// Options configure the HTTP layer. The zero value is usable.
type Options struct {
	// Logger receives one line per request; nil means slog.Default().
	Logger *slog.Logger
	// Registry receives the HTTP metrics and is served at /metrics; nil means
	// a fresh registry with the Go and process collectors.
	Registry *prometheus.Registry
	// MaxBodyBytes bounds request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
	// RateLimit is the sustained requests per second allowed to one
	// user (all its tokens together), or to one client address for
	// requests without a valid token; RateBurst the burst above it; 0
	// means no limit. Limiter, when set, is used instead: the one that
	// the AWS endpoint takes from too, so that a caller has one budget.
	RateLimit float64
	RateBurst int
	Limiter   *httpx.Limiter
	// AWS, when set, answers AWS's protocols at /aws and /aws/
	// (awsapi.New), under the same request log and metrics.
	AWS http.Handler
	// Console, when set, answers the GET and HEAD requests outside the
	// API's paths that no route takes (console.Handler): the web console,
	// mounted beside the API by the binary.
	Console http.Handler
}

// DefaultMaxBodyBytes is the request body limit when Options leave it unset.
const DefaultMaxBodyBytes = 1 << 20

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
		o.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.RateBurst <= 0 {
		o.RateBurst = max(1, int(2*o.RateLimit))
	}
	return o
}

// server holds what the handlers need.
type server struct {
	svc          contract.Front
	maxBodyBytes int64
}

// New returns the HTTP handler of the v1 API on svc.
func New(svc contract.Front, opts Options) http.Handler {
	opts = opts.withDefaults()
	useProblemErrors()
	useStrictBodies()

	mux := http.NewServeMux()
	hapi := humago.New(mux, humaConfig())
	s := &server{svc: svc, maxBodyBytes: opts.MaxBodyBytes}
	limiter := opts.Limiter
	if limiter == nil {
		limiter = httpx.NewLimiter(opts.RateLimit, opts.RateBurst)
	}
	g := &guard{api: hapi, svc: svc, limiter: limiter, now: time.Now}
	hapi.UseMiddleware(g.middleware)

	s.registerFleet(hapi)
	s.registerPolicy(hapi)
	s.registerBlocks(hapi)
	s.registerPlans(hapi)
	s.registerSeries(hapi)
	s.registerOrders(hapi)
	s.registerEvents(hapi)
	s.registerWebhooks(hapi)
	s.registerOperations(hapi)
	if svc.Simulated() {
		s.registerClock(hapi)
	}
	s.registerTeams(hapi)
	s.registerDisable(hapi)
	s.registerAccessKeys(hapi)
	s.registerAudit(hapi)
	s.registerSpend(hapi)
	s.registerNodes(hapi)
	s.registerJobs(hapi)
	s.registerCalendars(hapi)
	mustHaveAccessRules(hapi)
	completeEmbedded(hapi)
	declareProblems(hapi)
	if opts.AWS != nil {
		mux.Handle("/aws", opts.AWS)
		mux.Handle("/aws/", opts.AWS)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry}))

	return &middleware{
		next:    withConsole(mux, opts.Console),
		log:     opts.Logger,
		metrics: newHTTPMetrics(opts.Registry),
		now:     svc.Now,
		aws:     opts.AWS != nil,
	}
}

// humaConfig is huma's default configuration without the docs UI, the
// /schemas routes and the $schema links they add to every response body,
// with capblock's JSON format: request keys matched exactly, responses
// encoded before their status is sent (encode.go).
func humaConfig() huma.Config {
	registry := huma.NewMapRegistry("#/components/schemas/", schemaName)
	return huma.Config{
		OpenAPI: &huma.OpenAPI{
			OpenAPI: "3.1.0",
			Info: &huma.Info{
				Title:   "capblock",
				Version: "v1",
				Description: "Guaranteed windows of GPU capacity (capacity blocks). Errors are application/problem+json with a stable code. " +
					"Every response carries the service's clock in the header " + NowHeader + " (RFC 3339, UTC): the simulated time on a server run with --sim-clock. " +
					"Clients compute relative times (now, +5d, tomorrow) from it, not from their own clock.",
			},
			// Paths are relative to the server the document is read from.
			Servers: []*huma.Server{{URL: "/", Description: "the server that serves this document"}},
			Components: &huma.Components{
				Schemas: registry,
				SecuritySchemes: map[string]*huma.SecurityScheme{
					"bearer": {Type: "http", Scheme: "bearer", Description: "An API token (cbt_…): the first administrator's is written to admin.token beside the database at first start; POST /v1/users/{id}/tokens makes more."},
				},
			},
		},
		OpenAPIPath: "/openapi",
		Formats: map[string]huma.Format{
			"application/json": jsonFormat,
			"json":             jsonFormat,
		},
		DefaultFormat: "application/json",
		Transformers:  []huma.Transformer{encodeResponse},
	}
}

// schemaName names wire types in the OpenAPI document: blockJSON is "Block".
func schemaName(t reflect.Type, hint string) string {
	name := huma.DefaultSchemaNamer(t, hint)
	if trimmed := strings.TrimSuffix(name, "JSON"); trimmed != "" {
		return trimmed
	}
	return name
}

// operation fills what every operation shares: the body limit and the tag.
func (s *server) operation(id, method, path, tag, summary string) huma.Operation {
	// An empty list, not none: the document says that a public
	// operation needs no token, rather than leaving it unsaid.
	security := []map[string][]string{}
	description := "Public: no token needed."
	if uc := useCases[id]; uc != public {
		security = []map[string][]string{{"bearer": {}}}
		description = accessNote(uc)
	}
	return huma.Operation{
		Security:    security,
		OperationID: id,
		Method:      method,
		Path:        path,
		Summary:     summary,
		Description: description,
		Tags:        []string{tag},
		// huma rejects a body that reaches the limit, so allow one byte
		// more to accept bodies of exactly MaxBodyBytes.
		MaxBodyBytes: s.maxBodyBytes + 1,
	}
}

// out wraps a response body for huma.
type out[T any] struct {
	Body T
}

func reply[T any](body T) (*out[T], error) { return &out[T]{Body: body}, nil }
