package service

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"capblock/internal/telemetry"
)

// traced starts a span of the service's work, of kind (internal for a
// use case's decision or an action's application, client for a call to
// an engine or a webhook) and a child of ctx's; the function it returns
// ends it with the work's error.
func traced(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, func(*error)) {
	ctx, span := telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, func(err *error) {
		if err != nil && *err != nil {
			span.RecordError(*err)
			span.SetStatus(codes.Error, (*err).Error())
		}
		span.End()
	}
}
