// Package telemetry is capblock's tracing: OpenTelemetry spans exported
// over OTLP, configured by the standard OTEL_* environment variables and
// off when none asks for them.
//
// A purchase is followed from the API request through the service's
// decision and the store's commit to the outbox action it stored and
// the engine call that applies it, on whichever replica leads by then:
// the action keeps the W3C trace context of the decision that stored it
// (Inject), and the worker that applies it continues that trace
// (Extract). Webhook deliveries carry the trace context of their event
// to the receiver, and clients may send theirs with a request.
package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of capblock's spans.
const Name = "capblock"

// Tracer is capblock's tracer: a no-op until Setup turns tracing on.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// propagator is W3C trace context and baggage, what clients send and
// webhooks receive.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func init() { otel.SetTextMapPropagator(propagator) }

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or _TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Check validates what the environment asks of tracing before anything
// starts, so that serve refuses a configuration it cannot honour instead
// of silently dropping every span.
func Check(getenv func(string) string) error {
	if !Enabled(getenv) {
		return nil
	}
	if exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		return fmt.Errorf("OTEL_TRACES_EXPORTER=%s is not supported: capblock exports traces over OTLP (set otlp or none)", exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" && p != "http/protobuf" {
			return fmt.Errorf("%s=%s is not supported: capblock sends OTLP over HTTP (http/protobuf; a collector listens for it on port 4318)", v, p)
		}
		if getenv(v) != "" {
			break // the traces' own setting wins over the general one
		}
	}
	return nil
}

// Setup turns tracing on when the environment asks for it (Enabled),
// for the service named by OTEL_SERVICE_NAME (capblock by default), and
// returns the function that flushes and stops it; with tracing off it
// does nothing and so does the function.
func Setup(ctx context.Context, version string) (shutdown func(context.Context) error, err error) {
	if err := Check(os.Getenv); err != nil {
		return nil, err
	}
	if !Enabled(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx) // endpoint, headers, timeout from OTEL_EXPORTER_OTLP_*
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP trace exporter: %w", err)
	}
	attrs := []resource.Option{resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(semconv.ServiceVersion(version))}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceName(Name)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil {
		return nil, fmt.Errorf("describing this process for its traces: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on,
	// by default), as the SDK reads it.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Inject returns the W3C trace context (traceparent, and tracestate
// when there is one) of ctx's span, as one string to store with what
// the span decided; "" when ctx has no sampled span.
func Inject(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if ts := c["tracestate"]; ts != "" {
		return c["traceparent"] + ";" + ts
	}
	return c["traceparent"]
}

// Extract returns ctx with the remote span context that Inject wrote, so
// that spans started from it continue the trace; ctx itself when stored
// is empty or not a trace context.
func Extract(ctx context.Context, stored string) context.Context {
	if stored == "" {
		return ctx
	}
	parent, state, _ := strings.Cut(stored, ";")
	c := propagation.MapCarrier{"traceparent": parent}
	if state != "" {
		c["tracestate"] = state
	}
	return propagation.TraceContext{}.Extract(ctx, c)
}

// Headers writes ctx's trace context into the headers of an outgoing
// request (a webhook delivery).
func Headers(ctx context.Context, set func(key, value string)) {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	for k, v := range c {
		set(k, v)
	}
}

// StartRequest starts the span of an HTTP request served, continuing the
// trace of the W3C context the client sent, if any; its name is the
// method until the route is known (EndRequest).
func StartRequest(r *http.Request) (*http.Request, trace.Span) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := Tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path)))
	return r.WithContext(ctx), span
}

// EndRequest names the span of a served request by its route and ends
// it with the status answered.
func EndRequest(span trace.Span, method, route string, status int) {
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// TraceID is the id of ctx's sampled trace, for the logs; "" when none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
