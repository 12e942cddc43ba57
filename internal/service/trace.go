package service

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/telemetry"
)

// traced starts the span of a use case's decision (a child of the
// request's); the function it returns ends it with the use case's error.
func traced(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(*error)) {
	ctx, span := telemetry.Tracer().Start(ctx, name, trace.WithAttributes(attrs...))
	return ctx, func(err *error) {
		if err != nil && *err != nil {
			span.RecordError(*err)
			span.SetStatus(codes.Error, "refused")
		}
		span.End()
	}
}
