package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"capblock/internal/core"
)

// Stable problem codes of API.md. Clients switch on these, never on titles
// or details, so they never change.
const (
	CodeInvalidArgument     = "invalid_argument"
	CodeUnauthenticated     = "unauthenticated"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	CodeNoCapacity          = "no_capacity"
	CodeOfferingExpired     = "offering_expired"
	CodeOfferingInvalid     = "offering_invalid"
	CodeIdempotencyMismatch = "idempotency_mismatch"
	CodeQuotaExceeded       = "quota_exceeded"
	CodeBudgetExceeded      = "budget_exceeded"
	CodeInvalidState        = "invalid_state"
	CodeOfferingUsed        = "offering_used"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal"
)

// problemJSON is the media type of every error response.
const problemJSON = "application/problem+json"

// internalDetail is all a client learns about an unexpected failure; the
// real error goes to the log.
const internalDetail = "an internal error occurred; it has been logged"

// titles are the short, fixed summaries of each code.
var titles = map[string]string{
	CodeInvalidArgument:     "Invalid argument",
	CodeUnauthenticated:     "Unauthenticated",
	CodeForbidden:           "Forbidden",
	CodeNotFound:            "Not found",
	CodeConflict:            "Conflict",
	CodeNoCapacity:          "Not enough capacity",
	CodeOfferingExpired:     "Offering expired",
	CodeOfferingInvalid:     "Offering invalid",
	CodeIdempotencyMismatch: "Client token reused with other parameters",
	CodeQuotaExceeded:       "Quota exceeded",
	CodeBudgetExceeded:      "Budget exceeded",
	CodeInvalidState:        "Invalid state",
	CodeOfferingUsed:        "Offering already used",
	CodeRateLimited:         "Too many requests",
	CodeInternal:            "Internal error",
}

// Problem is an RFC 9457 problem document with capblock's stable code. Every
// 4xx and 5xx response of the API carries one.
type Problem struct {
	Type   string `json:"type" example:"about:blank" doc:"Always about:blank; the code identifies the problem."`
	Title  string `json:"title" example:"Not enough capacity" doc:"Short summary of the code."`
	Status int    `json:"status" example:"409" doc:"HTTP status code."`
	Code   string `json:"code" example:"no_capacity" doc:"Stable machine-readable code." enum:"invalid_argument,unauthenticated,forbidden,not_found,conflict,no_capacity,offering_expired,offering_invalid,idempotency_mismatch,quota_exceeded,budget_exceeded,invalid_state,offering_used,rate_limited,internal"`
	Detail string `json:"detail" example:"only 3 of 4 h100.8x free" doc:"What went wrong this time, for people."`
}

// NewProblem returns the problem for status and code with a detail for users.
func NewProblem(status int, code, detail string) *Problem {
	title, ok := titles[code]
	if !ok {
		title = http.StatusText(status)
	}
	return &Problem{Type: "about:blank", Title: title, Status: status, Code: code, Detail: detail}
}

// Error makes a Problem an error that huma writes as the response.
func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// GetStatus is the response status (huma.StatusError).
func (p *Problem) GetStatus() int { return p.Status }

// ContentType makes huma answer application/problem+json (huma.ContentTypeFilter).
func (p *Problem) ContentType(string) string { return problemJSON }

// sentinels maps core's domain outcomes to problems, most specific first.
var sentinels = []struct {
	err    error
	status int
	code   string
}{
	{core.ErrOfferingExpired, http.StatusGone, CodeOfferingExpired},
	{core.ErrOfferingInvalid, http.StatusBadRequest, CodeOfferingInvalid},
	{core.ErrIdempotencyMismatch, http.StatusConflict, CodeIdempotencyMismatch},
	{core.ErrOfferingUsed, http.StatusConflict, CodeOfferingUsed},
	{core.ErrNoCapacity, http.StatusConflict, CodeNoCapacity},
	{core.ErrInvalidState, http.StatusConflict, CodeInvalidState},
	{core.ErrQuotaExceeded, http.StatusForbidden, CodeQuotaExceeded},
	{core.ErrBudgetExceeded, http.StatusPaymentRequired, CodeBudgetExceeded},
	{core.ErrUnauthenticated, http.StatusUnauthorized, CodeUnauthenticated},
	{core.ErrForbidden, http.StatusForbidden, CodeForbidden},
	{core.ErrRateLimited, http.StatusTooManyRequests, CodeRateLimited},
	{core.ErrNotFound, http.StatusNotFound, CodeNotFound},
	{core.ErrConflict, http.StatusConflict, CodeConflict},
	{core.ErrInvalidArgument, http.StatusBadRequest, CodeInvalidArgument},
}

// serviceProblem maps an error returned by the Service to the problem the
// client sees. Domain errors keep their message, which is written for users;
// anything else becomes an opaque internal error and is recorded for the
// request log.
func serviceProblem(ctx context.Context, err error) *Problem {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return NewProblem(s.status, s.code, err.Error())
		}
	}
	recordError(ctx, err)
	return NewProblem(http.StatusInternalServerError, CodeInternal, internalDetail)
}

// invalid is a syntactic error found by the API itself.
func invalid(format string, args ...any) *Problem {
	return NewProblem(http.StatusBadRequest, CodeInvalidArgument, fmt.Sprintf(format, args...))
}

// codeForStatus is the code of an error that huma or net/http raised on its
// own, which only knows the status.
func codeForStatus(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return CodeUnauthenticated
	case status == http.StatusPaymentRequired:
		return CodeBudgetExceeded
	case status == http.StatusForbidden:
		return CodeForbidden
	case status == http.StatusNotFound:
		return CodeNotFound
	case status == http.StatusConflict:
		return CodeConflict
	case status == http.StatusTooManyRequests:
		return CodeRateLimited
	case status >= 500:
		return CodeInternal
	default:
		// 400, 405, 406, 408, 411, 413, 415, 422, ...: the request itself is wrong.
		return CodeInvalidArgument
	}
}

// statusProblem builds the problem for an error huma raised by status, with
// its message and details (validation errors naming the field).
func statusProblem(status int, msg string, errs ...error) *Problem {
	if status == http.StatusUnprocessableEntity {
		// A request that fails validation is an invalid argument, like any
		// other malformed request.
		status = http.StatusBadRequest
	}
	code := codeForStatus(status)
	detail := msg
	switch {
	case status >= 500:
		detail = internalDetail
	case status == http.StatusRequestEntityTooLarge:
		detail = "request body is too large"
	case len(errs) > 0:
		detail = validationDetail(errs)
	}
	if detail == "" {
		detail = http.StatusText(status)
	}
	return NewProblem(status, code, detail)
}

// validationDetail renders huma's error details as "query.instanceCount:
// expected number >= 1; body.foo: unexpected property". Values are left out:
// they may be large (a whole body) or private.
func validationDetail(errs []error) string {
	parts := make([]string, 0, len(errs))
	for _, err := range errs {
		if err == nil {
			continue
		}
		var d huma.ErrorDetailer
		if errors.As(err, &d) {
			ed := d.ErrorDetail()
			if ed.Location != "" {
				parts = append(parts, ed.Location+": "+ed.Message)
				continue
			}
			parts = append(parts, ed.Message)
			continue
		}
		parts = append(parts, err.Error())
	}
	return strings.Join(parts, "; ")
}

var installErrorModel sync.Once

// useProblemErrors makes huma build every error it raises itself (validation,
// malformed bodies, oversized bodies, unexpected handler errors) as a
// Problem. huma keeps this hook in a package variable, so it is set once for
// the process.
func useProblemErrors() {
	installErrorModel.Do(func() {
		huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
			return statusProblem(status, msg, errs...)
		}
		huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
			if status >= 500 && hctx != nil {
				cause := errors.New(msg)
				if joined := errors.Join(errs...); joined != nil {
					cause = fmt.Errorf("%s: %w", msg, joined)
				}
				recordError(hctx.Context(), cause)
			}
			return huma.NewError(status, msg, errs...)
		}
	})
}

// errorSlot carries the real cause of a 5xx from where it happened to the
// request log line.
type errorSlot struct {
	mu  sync.Mutex
	err error
}

type errorSlotKey struct{}

// recordError remembers err for the request log, if ctx belongs to a request
// that passed through the API's middleware.
func recordError(ctx context.Context, err error) {
	if ctx == nil || err == nil {
		return
	}
	if slot, ok := ctx.Value(errorSlotKey{}).(*errorSlot); ok {
		slot.mu.Lock()
		if slot.err == nil {
			slot.err = err
		}
		slot.mu.Unlock()
	}
}

func (s *errorSlot) get() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
