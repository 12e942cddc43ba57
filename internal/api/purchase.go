package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// purchaseOutput answers a purchase: 201 with what it bought, or 200 with
// what the same clientToken bought before (Status).
type purchaseOutput[T any] struct {
	Status int
	Body   T
}

// purchased is the answer of a purchase of body, created now or before.
func purchased[T any](body T, created bool) *purchaseOutput[T] {
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return &purchaseOutput[T]{Status: status, Body: body}
}

// registerPurchase registers op, a purchase of a noun (block, plan,
// series) that answers 201 when it buys and 200 when its clientToken
// was seen before, and documents both answers: huma documents only the
// default status.
func registerPurchase[I, O any](api huma.API, op huma.Operation, noun string, handler func(context.Context, *I) (*O, error)) {
	op.DefaultStatus = http.StatusCreated
	op.Description = "Answers 201 with the new " + noun + ", or 200 with the earlier " + noun +
		" when the clientToken was seen before with the same parameters."
	huma.Register(api, op, handler)
	if o := api.OpenAPI().Paths[op.Path].Post; o != nil {
		created := *o.Responses["201"]
		created.Description = "The " + noun + " bought earlier under the same clientToken."
		o.Responses["200"] = &created
	}
}
