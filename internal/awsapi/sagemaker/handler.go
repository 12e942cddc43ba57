// Package sagemaker answers SageMaker's JSON 1.1 protocol for training
// plans and training jobs, so that code written for SageMaker (an AWS SDK,
// the AWS CLI) buys capblock's plans and runs capblock's jobs by changing
// only its endpoint and keys. Each operation maps onto contract.Service;
// capblock's hours, durations and rules stay its own behind the same
// calls.
//
// The endpoint in front of it verifies the request's signature, reads
// the operation from X-Amz-Target (SageMaker.<Op>) and calls Serve with
// the caller already authenticated. Serve calls the service as that
// caller, which checks each call against contract's access table, scopes
// every read to the caller's team, and answers in the protocol's shapes
// and errors.
package sagemaker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

	"capblock/internal/contract"
	"capblock/internal/core"
)

// Options configure a Handler.
type Options struct {
	// InstanceType maps an AWS name (e.g. ml.p5.48xlarge) to capblock's
	// type; AWSName maps back ("" when none: then capblock's name is
	// used). Either may be nil: capblock's names are then used as they
	// are.
	InstanceType func(awsName string) (string, bool)
	AWSName      func(capblockType string) string
	// Region and Account make the ARNs:
	// arn:aws:sagemaker:<region>:<account>:training-plan/<name>.
	Region, Account string
	// Now is the time the defaults of a search count from; nil takes the
	// service's simulated clock when it has one, else the wall clock.
	Now func() time.Time
	// Log records the errors answered as InternalFailure; nil discards
	// them.
	Log *slog.Logger
}

// Handler serves SageMaker's operations on a contract.Service.
type Handler struct {
	svc  contract.Service
	opts Options
}

// New returns a Handler of svc; now is the service's clock (contract.
// Gate's Now).
func New(svc contract.Service, now func() time.Time, opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Account == "" {
		opts.Account = "000000000000"
	}
	return &Handler{svc: svc, opts: opts}
}

// operation is one SageMaker operation: the use case it calls (whose
// rule in contract's access table decides who may) and what it does with
// the request's body.
type operation struct {
	uc       contract.UseCase
	mutating bool
	do       func(h *Handler, ctx context.Context, c call) (any, error)
}

// call is one request as an operation sees it.
type call struct {
	p     core.Principal
	scope string
	body  []byte
}

// operations are the operations served. AccessRules lists their use
// cases.
var operations = map[string]operation{
	"SearchTrainingPlanOfferings": {"PlanOfferings", false, (*Handler).searchOfferings},
	"CreateTrainingPlan":          {"PurchasePlan", true, (*Handler).createPlan},
	"DescribeTrainingPlan":        {"GetPlan", false, (*Handler).describePlan},
	"ListTrainingPlans":           {"ListPlans", false, (*Handler).listPlans},
	"CreateTrainingJob":           {"CreateJob", true, (*Handler).createJob},
	"DescribeTrainingJob":         {"GetJob", false, (*Handler).describeJob},
	"ListTrainingJobs":            {"ListJobs", false, (*Handler).listJobs},
	"StopTrainingJob":             {"StopJob", true, (*Handler).stopJob},
}

// AccessRule is the use case an operation calls, whose rule in
// contract's access table decides who may, and whether it changes
// anything (the endpoint audits those, as the REST API audits its
// mutating requests: every SageMaker call is a POST).
type AccessRule struct {
	UseCase  contract.UseCase
	Mutating bool
}

// AccessRules returns the use case of every operation served, by name.
func AccessRules() map[string]AccessRule {
	out := make(map[string]AccessRule, len(operations))
	for name, op := range operations {
		out[name] = AccessRule{UseCase: op.uc, Mutating: op.mutating}
	}
	return out
}

// Mutating reports whether operation op changes something (a purchase, a
// job started or stopped): the endpoint records those in the audit log.
func (h *Handler) Mutating(op string) bool {
	o, ok := operations[op]
	return ok && o.mutating
}

// Serve answers one call of operation op (the part of X-Amz-Target after
// "SageMaker.") with body as its input, for p, already authenticated.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, p core.Principal, op string, body []byte) {
	o, ok := operations[op]
	if !ok {
		h.writeError(w, &awsError{Type: "UnknownOperationException", Message: fmt.Sprintf("operation %q is not supported by capblock's SageMaker endpoint", op)})
		return
	}
	ctx := contract.WithPrincipal(r.Context(), p)
	if err := contract.Permitted(ctx, o.uc); err != nil {
		h.writeError(w, h.toAWS(err))
		return
	}
	out, err := o.do(h, ctx, call{p: p, scope: contract.Scope(p), body: body})
	if err != nil {
		h.writeError(w, h.toAWS(err))
		return
	}
	data, err := json.Marshal(out)
	if err != nil {
		h.writeError(w, h.toAWS(err))
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

const contentType = "application/x-amz-json-1.1"

// decode reads a request body into in; an empty body is an empty input.
// Members capblock does not know are ignored, as AWS's services ignore
// members newer than themselves.
func decode(body []byte, in any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	err := json.Unmarshal(body, in)
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var ts *timestampError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syntax):
		return validationf("the request body is not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return validationf("member %s: want %s, not a JSON %s", typ.Field, jsonKind(typ.Type.Kind()), typ.Value)
	case errors.As(err, &ts):
		return validationf("a timestamp must be seconds since 1970, as a number; %s", ts.detail)
	case errors.As(err, &typ):
		return validationf("the request body must be a JSON object, not a JSON %s", typ.Value)
	}
	return validationf("the request body does not fit this operation's input")
}

// jsonKind names what a Go kind reads from JSON.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// awsError is an error in the protocol's shape.
type awsError struct {
	Type    string `json:"__type"`
	Message string `json:"Message"`
	status  int
}

func (e *awsError) Error() string { return e.Type + ": " + e.Message }

func validationf(format string, args ...any) error {
	return &awsError{Type: "ValidationException", Message: fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &awsError{Type: "ResourceNotFound", Message: fmt.Sprintf(format, args...)}
}

func inUsef(format string, args ...any) error {
	return &awsError{Type: "ResourceInUse", Message: fmt.Sprintf(format, args...)}
}

// errorTypes maps capblock's sentinel errors to SageMaker's error types,
// first match wins. SageMaker answers every client error with status 400.
var errorTypes = []struct {
	err error
	typ string
}{
	{core.ErrOfferingExpired, "ValidationException"},
	{core.ErrOfferingInvalid, "ValidationException"},
	{core.ErrOfferingUsed, "ResourceInUse"},
	{core.ErrIdempotencyMismatch, "ResourceInUse"},
	{core.ErrNoCapacity, "ResourceLimitExceeded"},
	{core.ErrQuotaExceeded, "ResourceLimitExceeded"},
	{core.ErrBudgetExceeded, "ResourceLimitExceeded"},
	{core.ErrInvalidState, "ValidationException"},
	{core.ErrForbidden, "AccessDeniedException"},
	{core.ErrUnauthenticated, "AccessDeniedException"},
	{core.ErrRateLimited, "ThrottlingException"},
	{core.ErrNotFound, "ResourceNotFound"},
	{core.ErrConflict, "ConflictException"},
	{core.ErrInvalidArgument, "ValidationException"},
}

// toAWS maps an error to the protocol's; one it does not know is an
// InternalFailure whose detail stays in the log.
func (h *Handler) toAWS(err error) *awsError {
	var ae *awsError
	if errors.As(err, &ae) {
		return ae
	}
	for _, e := range errorTypes {
		if errors.Is(err, e.err) {
			return &awsError{Type: e.typ, Message: userMessage(err, e.err)}
		}
	}
	h.opts.Log.Error("sagemaker: internal error", "err", err)
	return &awsError{Type: "InternalFailure", Message: "the request failed on the server; retry later", status: http.StatusInternalServerError}
}

// userMessage is err's message without the sentinel's prefix, as the
// REST API words it.
func userMessage(err, sentinel error) string {
	msg := err.Error()
	prefix := sentinel.Error() + ": "
	if i := strings.Index(msg, prefix); i >= 0 {
		return msg[:i] + msg[i+len(prefix):]
	}
	return msg
}

func (h *Handler) writeError(w http.ResponseWriter, e *awsError) {
	status := e.status
	if status == 0 {
		status = http.StatusBadRequest
	}
	data, _ := json.Marshal(e)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Amzn-ErrorType", e.Type)
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// epoch is a time on the wire: seconds since 1970 as a number, with
// fractions, as JSON 1.1 carries timestamps.
type epoch struct{ time.Time }

func (t epoch) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(t.UnixMilli()) / 1000)
}

func (t *epoch) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return &timestampError{detail: fmt.Sprintf("got %.40s", b)}
	}
	if f < 0 || f > 1e11 {
		return &timestampError{detail: fmt.Sprintf("%v is out of range", f)}
	}
	sec, frac := math.Modf(f)
	t.Time = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	return nil
}

// timestampError is a timestamp that is not one.
type timestampError struct{ detail string }

func (e *timestampError) Error() string { return "bad timestamp: " + e.detail }

// at is t on the wire, or nil when t is zero.
func at(t time.Time) *epoch {
	if t.IsZero() {
		return nil
	}
	return &epoch{t}
}

// arn is the ARN of a resource of kind (training-plan, training-job,
// reserved-capacity) named name.
func (h *Handler) arn(kind, name string) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:%s/%s", h.opts.Region, h.opts.Account, kind, name)
}

// nameOf reads a name from an ARN of kind or a bare name; an ARN of
// another kind, region or account names nothing here.
func (h *Handler) nameOf(kind, s string) (string, bool) {
	if !strings.HasPrefix(s, "arn:") {
		return s, s != ""
	}
	prefix := h.arn(kind, "")
	if !strings.HasPrefix(s, prefix) || len(s) == len(prefix) {
		return "", false
	}
	return s[len(prefix):], true
}

// awsType is the name an AWS client sees for a capblock type.
func (h *Handler) awsType(t string) string {
	if h.opts.AWSName != nil {
		if n := h.opts.AWSName(t); n != "" {
			return n
		}
	}
	return t
}

// capblockType is the capblock type an AWS client names: its AWS name,
// or capblock's own name of a type of the fleet.
func (h *Handler) capblockType(ctx context.Context, name string) (string, error) {
	if h.opts.InstanceType != nil {
		if t, ok := h.opts.InstanceType(name); ok {
			return t, nil
		}
	}
	fleet, err := h.svc.Fleet(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, t := range fleet.Types {
		if t.Name == name {
			return name, nil
		}
		names = append(names, h.awsType(t.Name))
	}
	return "", validationf("InstanceType %q is not offered; this fleet offers %s", name, strings.Join(names, ", "))
}

// checkName checks a SageMaker resource name: 1 to max letters, digits
// and hyphens, starting and ending with a letter or digit.
func checkName(member, s string, max int) error {
	ok := s != "" && len(s) <= max && s[0] != '-' && s[len(s)-1] != '-'
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			ok = false
		}
	}
	if !ok {
		return validationf("%s %q: want 1 to %d letters, digits and hyphens, starting and ending with a letter or digit", member, s, max)
	}
	return nil
}
