package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/telemetry"
)

// NowHeader is the response header that carries the service's clock
// (RFC 3339, UTC) on every answer: the simulated time on a server run with
// --sim-clock. Clients read "now", "+5d" and "tomorrow" from it, so that
// relative times mean the server's clock, not the client machine's.
const NowHeader = "Capblock-Now"

// middleware wraps the mux: it logs and measures every request, turns
// panics into 500 problems, and turns the mux's own plain-text errors (no
// such route, wrong method) into problems, so that every error response
// has the same shape. Every answer carries the service's time (NowHeader).
type middleware struct {
	next    http.Handler
	log     *slog.Logger
	metrics *httpMetrics
	now     func() time.Time // the service's clock
	// aws: /aws is AWS's protocols, whose errors keep their own shapes.
	aws bool
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w.Header().Set(NowHeader, m.now().UTC().Format(time.RFC3339Nano))
	slot := &errorSlot{}
	r, span := telemetry.StartRequest(r)
	r = r.WithContext(context.WithValue(r.Context(), errorSlotKey{}, slot))
	rw := &responseWriter{ResponseWriter: w, req: r, ownErrors: m.aws && isAWSPath(r.URL.Path)}
	defer func() {
		if p := recover(); p != nil {
			recordError(r.Context(), fmt.Errorf("panic: %v", p))
			if p == http.ErrAbortHandler {
				m.finish(r, rw, start, slot, span)
				panic(p)
			}
			if !rw.wroteHeader {
				rw.writeProblem(NewProblem(http.StatusInternalServerError, CodeInternal, internalDetail))
			}
		}
		m.finish(r, rw, start, slot, span)
	}()
	// The mux records the matched pattern in r.Pattern, which finish reads.
	m.next.ServeHTTP(rw, r)
}

// finish logs and counts a served request.
func (m *middleware) finish(r *http.Request, rw *responseWriter, start time.Time, slot *errorSlot, span trace.Span) {
	elapsed := time.Since(start)
	status := rw.status
	if status == 0 {
		status = http.StatusOK
	}
	route := routeOf(r)
	method := methodLabel(r.Method)
	m.metrics.observe(method, route, status, elapsed)
	telemetry.EndRequest(span, r.Method, route, status)

	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", elapsed),
	}
	if id := telemetry.TraceID(r.Context()); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
		if err := slot.get(); err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
	}
	m.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// routeOf is the matched route without its method ("/v1/blocks/{id}"), or
// "unmatched", so that metric labels stay few.
func routeOf(r *http.Request) string {
	if r.Pattern == "" {
		return "unmatched"
	}
	if _, path, ok := strings.Cut(r.Pattern, " "); ok {
		return path
	}
	return r.Pattern
}

// methodLabel keeps arbitrary client methods out of metric labels.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

// responseWriter records the status, and replaces an error written by
// something other than the API's own handlers (the mux's 404 and 405,
// promhttp) with a problem.
type responseWriter struct {
	http.ResponseWriter
	req         *http.Request
	status      int
	wroteHeader bool
	discard     bool // the original error body is dropped
	ownErrors   bool // error bodies are the handler's own (AWS's shapes)
}

// isAWSPath reports whether path is served by the AWS endpoint.
func isAWSPath(path string) bool {
	return path == "/aws" || strings.HasPrefix(path, "/aws/")
}

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code >= 400 && !w.ownErrors && !strings.HasPrefix(w.Header().Get("Content-Type"), problemJSON) {
		w.writeProblem(plainErrorProblem(code, w.req, w.Header()))
		w.discard = true
		return
	}
	w.wroteHeader = true
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.discard {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// writeProblem sends p as the whole response.
func (w *responseWriter) writeProblem(p *Problem) {
	body, err := json.Marshal(p)
	if err != nil {
		// A struct of strings and an int always marshals.
		panic(err)
	}
	h := w.Header()
	h.Set("Content-Type", problemJSON)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.wroteHeader = true
	w.status = p.Status
	w.ResponseWriter.WriteHeader(p.Status)
	_, _ = w.ResponseWriter.Write(append(body, '\n'))
}

// Flush lets streaming handlers flush through the wrapper.
func (w *responseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController (and huma's read deadlines) the
// underlying writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// plainErrorProblem describes an error status that came without a problem.
func plainErrorProblem(status int, r *http.Request, h http.Header) *Problem {
	switch status {
	case http.StatusNotFound:
		return NewProblem(status, CodeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		detail := fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)
		if allow := h.Get("Allow"); allow != "" {
			detail += " (allowed: " + allow + ")"
		}
		return NewProblem(status, CodeInvalidArgument, detail)
	}
	if status >= 500 {
		recordError(r.Context(), errors.New(http.StatusText(status)))
	}
	return statusProblem(status, http.StatusText(status))
}

// httpMetrics are the request counter and latency histogram.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	labels := []string{"method", "route", "code"}
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "capblock",
			Name:      "http_requests_total",
			Help:      "HTTP requests served, by method, route and status code.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "capblock",
			Name:      "http_request_duration_seconds",
			Help:      "HTTP request latency, by method, route and status code.",
			// Long polls of /v1/events wait up to 60 s.
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, labels),
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	return m
}

// register registers c, or returns the collector already registered under
// its name when a second handler shares the registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("registering HTTP metrics: %v", err))
	}
	return c
}

func (m *httpMetrics) observe(method, route string, status int, elapsed time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(method, route, code).Inc()
	m.duration.WithLabelValues(method, route, code).Observe(elapsed.Seconds())
}
