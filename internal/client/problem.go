package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Problem is an RFC 9457 problem answer of the API: every 4xx and 5xx.
// Code is the stable, machine-readable reason (no_capacity, not_found, …).
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status"`
	Code   string `json:"code,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Errors lists per-field problems, when the server gives them.
	Errors []FieldProblem `json:"errors,omitempty"`
}

// FieldProblem is one invalid part of a request.
type FieldProblem struct {
	Message  string `json:"message,omitempty"`
	Location string `json:"location,omitempty"`
}

// Problem codes of API.md.
const (
	CodeInvalidArgument     = "invalid_argument"
	CodeUnauthenticated     = "unauthenticated"
	CodeForbidden           = "forbidden"
	CodeNotFound            = "not_found"
	CodeConflict            = "conflict"
	CodeNoCapacity          = "no_capacity"
	CodeOfferingExpired     = "offering_expired"
	CodeOfferingInvalid     = "offering_invalid"
	CodeOfferingUsed        = "offering_used"
	CodeIdempotencyMismatch = "idempotency_mismatch"
	CodeQuotaExceeded       = "quota_exceeded"
	CodeBudgetExceeded      = "budget_exceeded"
	CodeInvalidState        = "invalid_state"
	CodeRateLimited         = "rate_limited"
	CodeInternal            = "internal"
)

// Error is one line: "no_capacity: only 3 of 4 h100.8x free …".
func (p *Problem) Error() string {
	code := p.Code
	if code == "" {
		code = fmt.Sprintf("HTTP %d", p.Status)
	}
	msg := withoutContext(p.Detail)
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = http.StatusText(p.Status)
	}
	var fields []string
	for _, f := range p.Errors {
		switch {
		case f.Location != "" && f.Message != "":
			fields = append(fields, f.Location+": "+f.Message)
		case f.Message != "":
			fields = append(fields, f.Message)
		}
	}
	if len(fields) > 0 {
		msg += " (" + strings.Join(fields, "; ") + ")"
	}
	return oneLine(code + ": " + msg)
}

// wrapf says what the client was doing when err happened, unless err is
// the server's own Problem (one with a code): its detail already names
// what failed, and the caller knows what it asked, so that a message says
// each thing once ("invalid_state: block cb-1 is cancelled", not
// "cancelling block cb-1: invalid_state: …"). An answer without a code (a
// proxy's error page) keeps what was being done.
func wrapf(err error, format string, args ...any) error {
	var p *Problem
	if errors.As(err, &p) && p.Code != "" {
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// reasons are the server's words for its problem codes, which it puts
// between what it was doing and why ("changing block cb-1: invalid state:
// block cb-1 is cancelled; …").
var reasons = []string{
	"invalid argument", "not found", "conflict", "no capacity", "offering expired",
	"offering invalid", "offering already used", "client token reused with other parameters",
	"invalid state", "unauthenticated", "forbidden", "quota exceeded", "budget exceeded", "rate limited",
}

// withoutContext returns the part of a problem's detail after the last
// reason that the server's own wrapping put in it: the why, which names
// what failed, without the server's steps on the way there.
func withoutContext(detail string) string {
	cut := -1
	for _, r := range reasons {
		for from := 0; ; {
			i := strings.Index(detail[from:], r+": ")
			if i < 0 {
				break
			}
			i += from
			if i == 0 || strings.HasSuffix(detail[:i], ": ") {
				cut = max(cut, i+len(r)+2)
			}
			from = i + 1
		}
	}
	if cut < 0 || strings.TrimSpace(detail[cut:]) == "" {
		return detail
	}
	return detail[cut:]
}

// ProblemCode returns the problem code of err, or "" when err is not a
// *Problem.
func ProblemCode(err error) string {
	var p *Problem
	if errors.As(err, &p) {
		return p.Code
	}
	return ""
}

// decodeProblem builds the error of a non-2xx answer. A body that is not
// a problem (a proxy's HTML page, a plain-text 404) keeps the status and
// the start of the body.
func decodeProblem(status int, body []byte) error {
	var p Problem
	if err := json.Unmarshal(body, &p); err == nil && (p.Code != "" || p.Title != "" || p.Detail != "") {
		if p.Status == 0 {
			p.Status = status
		}
		return &p
	}
	detail := strings.TrimSpace(string(body))
	if len(detail) > 200 {
		detail = detail[:200] + "…"
	}
	return &Problem{Status: status, Title: http.StatusText(status), Detail: detail}
}

// oneLine folds whitespace so that a message prints as one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
