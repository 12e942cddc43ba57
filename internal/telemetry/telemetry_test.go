package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, false},
	} {
		if got := Enabled(env(tc.env)); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	on := "http://127.0.0.1:4318"
	for _, tc := range []struct {
		env  map[string]string
		want string // in the error; "" for none
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on}, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, ""}, // not enabled: nothing to check
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin", "OTEL_EXPORTER_OTLP_ENDPOINT": on}, "OTEL_TRACES_EXPORTER=zipkin is not supported"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""}, // off
	} {
		err := Check(env(tc.env))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%v): %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(%v) = %v, want %q", tc.env, err, tc.want)
		}
	}
}

func TestInjectExtract(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	stored := Inject(ctx)
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=x"; stored != want {
		t.Fatalf("Inject = %q, want %q", stored, want)
	}
	got := trace.SpanContextFromContext(Extract(context.Background(), stored))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsSampled() || got.TraceState().String() != "vendor=x" {
		t.Errorf("Extract(%q) = %+v", stored, got)
	}
	if Inject(context.Background()) != "" {
		t.Errorf("Inject without a span is not empty")
	}
	if c := Extract(context.Background(), "garbage"); trace.SpanContextFromContext(c).IsValid() {
		t.Errorf("Extract of garbage gave a span context")
	}
}
